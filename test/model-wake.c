// SPDX-License-Identifier: MIT
/*
 * Description: an exhaustive check of wait.c's sleep/wake protocol.  Every
 * interleaving, under sequential consistency (every step of the protocol
 * is a sequentially consistent atomic), of small systems of threads:
 *
 *   sleeper:  if room: take it, done.  sleepers += 1; seq = load(wq);
 *             xchg(woken, false); re-check room; futex_wait(wq, seq)
 *             (returns at once if wq != seq, else sleeps until a wake);
 *             sleepers -= 1; start over.
 *   waker:    room += 1; n = sleepers; if (n && !xchg(woken, true))
 *             { wq++; futex_wake(all) }
 *   thief:    takes room once, whenever there is some, without sleeping
 *             (a second producer that is not asleep).
 *
 * A final state (no thread can take a step) in which a sleeper is asleep
 * while there is room is a lost wake-up.  The protocol as wait.c has it
 * must have none; with the futex word loaded after woken is cleared (the
 * order before d485163) the checker must find one, which also shows it
 * can fail.  Systems: one sleeper, two wakers and a thief (the race
 * test/defect-lock-sleep hit); two sleepers and two wakers; two sleepers,
 * three wakers.  It models the protocol, not the code: test/bug-lost-wake
 * drives the code itself through the same race.
 */
#include "helpers.h"

#include <stdint.h>

#define MAX_S	2
#define MAX_W	3

enum { S_TRY, S_COUNT, S_STEP2, S_STEP3, S_RECHECK, S_WAIT, S_ASLEEP, S_UNCOUNT, S_DONE };
enum { W_FREE, W_LOOK, W_XCHG, W_BUMP, W_WAKE, W_DONE };

struct state {
	uint8_t room, sleepers, woken, wq;
	uint8_t thief_done;
	uint8_t s_pc[MAX_S], s_seq[MAX_S];
	uint8_t w_pc[MAX_W], w_n[MAX_W];
};

struct system {
	int ns, nw;
	bool thief;
	bool load_first;	/* wait.c's order: seq = load(wq) before xchg(woken) */
};

static const struct system *sys;
static uint64_t *visited;	/* open addressing, encoded state + 1; 0 empty */
static size_t visited_cap, visited_nr;
static long long states, finals;
static bool lost;
static char trace[256][64];
static int depth;
static char lost_trace[256][64];
static int lost_depth;
static bool old_shown;		/* one counterexample of the old order printed */

static uint64_t encode(const struct state *st)
{
	uint64_t k = 0;

	k = k * 4 + st->room;
	k = k * 4 + st->sleepers;
	k = k * 2 + st->woken;
	k = k * 4 + st->wq;
	k = k * 2 + st->thief_done;
	for (int i = 0; i < sys->ns; i++)
		k = (k * 9 + st->s_pc[i]) * 4 + st->s_seq[i];
	for (int i = 0; i < sys->nw; i++)
		k = (k * 6 + st->w_pc[i]) * 4 + st->w_n[i];
	return k;
}

static bool insert(uint64_t *tab, size_t cap, uint64_t k)
{
	size_t h = (size_t)((k * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);

	while (tab[h]) {
		if (tab[h] == k)
			return false;
		h = (h + 1) & (cap - 1);
	}
	tab[h] = k;
	return true;
}

static bool seen(const struct state *st)
{
	if (2 * (visited_nr + 1) > visited_cap) {
		size_t cap = visited_cap * 2;
		uint64_t *tab = calloc(cap, sizeof(*tab));

		ASSERT_TRUE(tab != NULL);
		for (size_t i = 0; i < visited_cap; i++)
			if (visited[i])
				insert(tab, cap, visited[i]);
		free(visited);
		visited = tab;
		visited_cap = cap;
	}
	if (!insert(visited, visited_cap, encode(st) + 1))
		return true;
	visited_nr++;
	return false;
}

static void note(const char *fmt, int who)
{
	snprintf(trace[depth], sizeof(trace[0]), fmt, who);
}

/* One step of sleeper i; false if it can take none. */
static bool step_sleeper(struct state *st, int i)
{
	switch (st->s_pc[i]) {
	case S_TRY:
		if (st->room) {
			st->room--;
			st->s_pc[i] = S_DONE;
			note("sleeper %d takes room", i);
		} else {
			st->s_pc[i] = S_COUNT;
			note("sleeper %d finds none", i);
		}
		return true;
	case S_COUNT:
		st->sleepers++;
		st->s_pc[i] = S_STEP2;
		note("sleeper %d: sleepers += 1", i);
		return true;
	case S_STEP2:
	case S_STEP3:
		if ((st->s_pc[i] == S_STEP2) == sys->load_first) {
			st->s_seq[i] = st->wq;
			note("sleeper %d: seq = wq", i);
		} else {
			st->woken = 0;
			note("sleeper %d: woken = false", i);
		}
		st->s_pc[i]++;
		return true;
	case S_RECHECK:
		st->s_pc[i] = st->room ? S_UNCOUNT : S_WAIT;
		note(st->room ? "sleeper %d: re-check sees room" : "sleeper %d: re-check: none", i);
		return true;
	case S_WAIT:
		st->s_pc[i] = st->wq != st->s_seq[i] ? S_UNCOUNT : S_ASLEEP;
		note(st->wq != st->s_seq[i] ? "sleeper %d: futex_wait: EAGAIN"
					    : "sleeper %d: futex_wait: asleep", i);
		return true;
	case S_UNCOUNT:
		st->sleepers--;
		st->s_pc[i] = S_TRY;
		note("sleeper %d: sleepers -= 1", i);
		return true;
	default:		/* asleep or done */
		return false;
	}
}

static bool step_waker(struct state *st, int i)
{
	switch (st->w_pc[i]) {
	case W_FREE:
		st->room++;
		st->w_pc[i] = W_LOOK;
		note("waker %d frees room", i);
		return true;
	case W_LOOK:
		st->w_n[i] = st->sleepers;
		st->w_pc[i] = st->sleepers ? W_XCHG : W_DONE;
		note(st->sleepers ? "waker %d sees sleepers" : "waker %d sees none", i);
		return true;
	case W_XCHG:
		st->w_pc[i] = st->woken ? W_DONE : W_BUMP;
		note(st->woken ? "waker %d: woken already set" : "waker %d: woken = true", i);
		st->woken = 1;
		return true;
	case W_BUMP:
		st->wq++;
		st->w_pc[i] = W_WAKE;
		note("waker %d: wq++", i);
		return true;
	case W_WAKE:
		for (int s = 0; s < sys->ns; s++)
			if (st->s_pc[s] == S_ASLEEP)
				st->s_pc[s] = S_UNCOUNT;
		st->w_pc[i] = W_DONE;
		note("waker %d: futex_wake", i);
		return true;
	default:
		return false;
	}
}

static void explore(const struct state *st)
{
	bool any = false;

	if (seen(st))
		return;
	states++;
	ASSERT_TRUE(depth < 255);
	for (int i = 0; i < sys->ns + sys->nw + 1; i++) {
		struct state next = *st;
		bool moved;

		if (i < sys->ns) {
			moved = step_sleeper(&next, i);
		} else if (i < sys->ns + sys->nw) {
			moved = step_waker(&next, i - sys->ns);
		} else {
			moved = sys->thief && !next.thief_done && next.room;
			if (moved) {
				next.room--;
				next.thief_done = 1;
				note("thief takes room", 0);
			}
		}
		if (!moved)
			continue;
		any = true;
		depth++;
		explore(&next);
		depth--;
	}
	if (any)
		return;
	finals++;
	for (int s = 0; s < sys->ns; s++) {
		if (st->s_pc[s] == S_ASLEEP && st->room && !lost) {
			lost = true;
			lost_depth = depth;
			memcpy(lost_trace, trace, sizeof(trace));
		}
	}
}

/* True if some interleaving loses a wake-up. */
static bool check(const struct system *s, const char *name)
{
	struct state st = { 0 };

	sys = s;
	visited_cap = 1024;
	visited_nr = 0;
	visited = calloc(visited_cap, sizeof(*visited));
	ASSERT_TRUE(visited != NULL);
	states = finals = 0;
	lost = false;
	depth = 0;
	explore(&st);
	free(visited);
	printf("  %-44s %s order: %lld states, %lld final, %s\n", name,
	       s->load_first ? "wait.c's" : "old", states, finals,
	       lost ? "a wake-up lost" : "no wake-up lost");
	if (lost && (s->load_first || !old_shown)) {
		old_shown = !s->load_first;
		for (int i = 0; i < lost_depth; i++)
			printf("    %s\n", lost_trace[i]);
	}
	return lost;
}

int main(void)
{
	static const struct { struct system s; const char *name; } systems[] = {
		{ { 1, 2, true, false }, "1 sleeper, 2 wakers, a thief" },
		{ { 2, 2, false, false }, "2 sleepers, 2 wakers" },
		{ { 2, 3, false, false }, "2 sleepers, 3 wakers" },
		{ { 2, 2, true, false }, "2 sleepers, 2 wakers, a thief" },
	};
	bool old_lost = false;

	for (size_t i = 0; i < sizeof(systems) / sizeof(systems[0]); i++) {
		struct system s = systems[i].s;

		s.load_first = true;
		if (check(&s, systems[i].name))
			t_fail_at(__FILE__, __LINE__, "wait.c's order loses a wake-up: %s",
				  systems[i].name);
		s.load_first = false;
		old_lost |= check(&s, systems[i].name);
	}
	/* The checker must be able to fail: the old order loses one. */
	ASSERT_TRUE(old_lost);
	return T_EXIT_PASS;
}
