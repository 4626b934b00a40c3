//! Intra-op parallelism for the CPU executor.
//!
//! An [`ExecutionContext`](crate::ExecutionContext) owns a [`Threads`]: how
//! many threads its layers may use, and a rayon pool of that many minus one
//! workers (the calling thread is the last one). While the context runs, the
//! pool is installed on the calling thread, and the kernels split their work
//! with [`par_chunks_mut`] and [`par_ranges`]. Outside a run, and on the
//! workers themselves, everything runs inline, so nested calls never
//! oversubscribe.
//!
//! Work is only ever split over independent outputs (rows or columns of a
//! product, channel planes, element ranges), never over a sum: every output
//! element is computed by the same arithmetic in the same order whatever the
//! thread count, so results are bit-identical for any `threads`.

use crate::error::{Error, Result};
use std::cell::{Cell, RefCell};
use std::ops::Range;
use std::sync::Arc;

/// The threads a context's layers run on.
pub struct Threads {
    count: usize,
    /// `count - 1` workers; `None` for one thread.
    pool: Option<Arc<rayon::ThreadPool>>,
}

impl Threads {
    /// One thread: the caller's.
    pub fn single() -> Threads {
        Threads { count: 1, pool: None }
    }

    /// `count` threads (the caller and `count - 1` workers).
    pub fn new(count: usize) -> Result<Threads> {
        if count == 0 || count > MAX_THREADS {
            return Err(Error::Device(format!("threads must be between 1 and {MAX_THREADS}, got {count}")));
        }
        if count == 1 {
            return Ok(Threads::single());
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(count - 1)
            .thread_name(|i| format!("trtc-worker-{i}"))
            .build()
            .map_err(|e| Error::Device(format!("cannot start {} worker threads: {e}", count - 1)))?;
        Ok(Threads { count, pool: Some(Arc::new(pool)) })
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// Runs `f` with this pool installed on the calling thread.
    pub fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        let Some(pool) = &self.pool else { return f() };
        let previous = CURRENT.with(|c| c.replace(Some((pool.clone(), self.count))));
        struct Restore(Option<(Arc<rayon::ThreadPool>, usize)>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let previous = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = previous);
            }
        }
        let _restore = Restore(previous);
        f()
    }
}

/// The most threads a context takes.
pub const MAX_THREADS: usize = 1024;

/// The threads this machine runs at once (1 when unknown).
pub fn machine_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_THREADS)
}

thread_local! {
    static CURRENT: RefCell<Option<(Arc<rayon::ThreadPool>, usize)>> = const { RefCell::new(None) };
    static SPLITS: Cell<usize> = const { Cell::new(0) };
}

/// How many calls this thread has split over more than one thread so far
/// (for tests and profiling).
pub fn splits() -> usize {
    SPLITS.with(Cell::get)
}

/// The threads layers may use on this thread now (1 outside a context's run).
pub fn threads() -> usize {
    CURRENT.with(|c| c.borrow().as_ref().map_or(1, |(_, n)| *n))
}

/// The installed pool and how many pieces to cut `units` units into, each
/// at least `grain` units; `None` when the work stays on this thread.
fn split(units: usize, grain: usize) -> Option<(Arc<rayon::ThreadPool>, usize)> {
    let (pool, threads) = CURRENT.with(|c| c.borrow().clone())?;
    let n = (units / grain.max(1)).min(threads);
    if n < 2 {
        return None;
    }
    SPLITS.with(|s| s.set(s.get() + 1));
    Some((pool, n))
}

/// Runs `f(first_unit, chunk)` over `data` cut into consecutive chunks of
/// whole units of `unit` elements (the last chunk also takes any partial
/// unit), in parallel when the current context has more than one thread
/// and there are at least `2 * grain` units.
pub fn par_chunks_mut<T: Send>(data: &mut [T], unit: usize, grain: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let unit = unit.max(1);
    let units = data.len() / unit;
    let Some((pool, n)) = split(units, grain) else {
        f(0, data);
        return;
    };
    let f = &f;
    pool.in_place_scope(|s| {
        let mut rest = data;
        for i in 0..n {
            let (start, end) = (units * i / n, units * (i + 1) / n);
            let len = if i == n - 1 { rest.len() } else { (end - start) * unit };
            let (chunk, tail) = std::mem::take(&mut rest).split_at_mut(len);
            rest = tail;
            if i == n - 1 {
                f(start, chunk);
            } else {
                s.spawn(move |_| f(start, chunk));
            }
        }
    });
}

/// Runs `f` over disjoint ranges covering `0..units`, in parallel as
/// [`par_chunks_mut`] decides. For callers whose outputs are not one
/// contiguous slice per range (they must still write disjoint elements).
pub fn par_ranges(units: usize, grain: usize, f: impl Fn(Range<usize>) + Sync) {
    let Some((pool, n)) = split(units, grain) else {
        f(0..units);
        return;
    };
    let f = &f;
    pool.in_place_scope(|s| {
        for i in 1..n {
            s.spawn(move |_| f(units * i / n..units * (i + 1) / n));
        }
        f(0..units / n);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn chunks_cover_every_unit_once_in_parallel() {
        let threads = Threads::new(3).unwrap();
        let mut data = vec![0u32; 7 * 5 + 2];
        let calls = AtomicUsize::new(0);
        threads.install(|| {
            assert_eq!(super::threads(), 3);
            par_chunks_mut(&mut data, 5, 1, |first, chunk| {
                calls.fetch_add(1, Ordering::Relaxed);
                for (i, v) in chunk.iter_mut().enumerate() {
                    *v += (first * 5 + i) as u32;
                }
            });
        });
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        assert!(data.iter().enumerate().all(|(i, &v)| v == i as u32));
        assert_eq!(super::threads(), 1, "the pool is uninstalled after the run");
    }

    #[test]
    fn ranges_cover_every_unit_once() {
        let threads = Threads::new(4).unwrap();
        let seen: Vec<AtomicUsize> = (0..10).map(|_| AtomicUsize::new(0)).collect();
        threads.install(|| {
            par_ranges(10, 2, |r| {
                for i in r {
                    seen[i].fetch_add(1, Ordering::Relaxed);
                }
            })
        });
        assert!(seen.iter().all(|s| s.load(Ordering::Relaxed) == 1));
    }

    #[test]
    fn small_work_and_single_threads_run_inline() {
        let calls = AtomicUsize::new(0);
        let mut data = vec![0u8; 100];
        par_chunks_mut(&mut data, 1, 1, |_, _| {
            calls.fetch_add(1, Ordering::Relaxed);
        });
        Threads::new(4).unwrap().install(|| {
            par_chunks_mut(&mut data, 1, 60, |_, _| {
                calls.fetch_add(1, Ordering::Relaxed);
            })
        });
        assert_eq!(calls.load(Ordering::Relaxed), 2);
        assert!(Threads::new(0).is_err());
    }
}
