// The round trip of one cache line between two threads: one stores 1 to
// an atomic and waits for 0, the other answers; 200,000 round trips.
// Tells the host's core placement apart (benches/RESULTS.md, issue 20).
//   gcc -O2 -pthread benches/core_round_trip.c -o /tmp/rt && /tmp/rt
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
static _Atomic int flag __attribute__((aligned(64)));
#define N 200000
static void* other(void* a) { (void)a; for (int i = 0; i < N; i++) { while (atomic_load_explicit(&flag, memory_order_acquire) != 1) ; atomic_store_explicit(&flag, 0, memory_order_release); } return 0; }
int main(void) {
  pthread_t t; pthread_create(&t, 0, other, 0);
  struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < N; i++) { atomic_store_explicit(&flag, 1, memory_order_release); while (atomic_load_explicit(&flag, memory_order_acquire) != 0) ; }
  clock_gettime(CLOCK_MONOTONIC, &b); pthread_join(t, 0);
  printf("round trip %.0f ns\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / N);
  return 0;
}
