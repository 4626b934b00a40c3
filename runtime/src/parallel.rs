//! Intra-op parallelism for the CPU executor.
//!
//! An [`ExecutionContext`](crate::ExecutionContext) owns a [`Threads`]: how
//! many threads its layers may use, and a pool of that many minus one
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
//!
//! The pool is a fork-join pool in the style of onnxruntime's: a region cuts
//! its work into at most `threads` equal pieces, hands piece `i` to worker
//! `i - 1` through that worker's own slot, runs piece 0 itself and spins
//! until the others are done. While a run is installed the workers spin
//! between regions (up to [`HOT_SPIN`] without work) instead of sleeping,
//! so a region costs two cache-line hand-offs rather than two thread
//! wake-ups; rayon, measured here first, parked the calling thread on a
//! condition variable for every region, which cost more than a small layer
//! on a busy host. Outside runs the workers park after [`COLD_SPIN`].

use crate::error::{Error, Result};
use std::cell::{Cell, RefCell, UnsafeCell};
use std::ops::Range;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a worker spins for its next piece while a run is installed.
const HOT_SPIN: Duration = Duration::from_millis(2);
/// How long a worker spins once no run is installed before it parks.
const COLD_SPIN: Duration = Duration::from_micros(50);
/// Spins between two yields of the core while waiting (about a microsecond
/// of `pause`s).
const YIELD_EVERY: u32 = 64;

/// The threads a context's layers run on.
pub struct Threads {
    count: usize,
    /// `count - 1` workers; `None` for one thread.
    pool: Option<Arc<Pool>>,
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
        let pool =
            Pool::start(count - 1).map_err(|e| Error::Device(format!("cannot start {} worker threads: {e}", count - 1)))?;
        Ok(Threads { count, pool: Some(Arc::new(pool)) })
    }

    pub fn count(&self) -> usize {
        self.count
    }

    /// Runs `f` with this pool installed on the calling thread; the workers
    /// are woken now and spin between the run's regions.
    pub fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        let Some(pool) = &self.pool else { return f() };
        let previous = CURRENT.with(|c| c.replace(Some((pool.clone(), self.count))));
        pool.shared.hot.fetch_add(1, Ordering::SeqCst);
        for (slot, handle) in pool.shared.slots.iter().zip(&pool.handles) {
            if slot.sleeping.load(Ordering::SeqCst) {
                handle.thread().unpark();
            }
        }
        struct Restore(Option<(Arc<Pool>, usize)>, Arc<Pool>);
        impl Drop for Restore {
            fn drop(&mut self) {
                self.1.shared.hot.fetch_sub(1, Ordering::SeqCst);
                let previous = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = previous);
            }
        }
        let _restore = Restore(previous, pool.clone());
        f()
    }
}

/// The least work one piece of a region should have, in multiply-adds
/// (products and convolutions). Below it, handing a piece to another core
/// costs more than it saves: the hand-off, and the piece's data moving
/// between the cores' caches. Measured with 2 threads on the 2-core dev
/// machine (benches/RESULTS.md, 2026-12-05): 4 and 16 times larger pieces
/// made ResNet-50, MobileNetV3-small and EfficientNet-B0 up to 30% slower
/// and small models no faster.
pub const PIECE_MACS: usize = 1 << 17;

/// The least work one piece of a streaming loop (pointwise ops, copies,
/// pooling and depthwise taps) should have, in elements read or written.
pub const PIECE_ELEMENTS: usize = 1 << 14;

/// The grain (least units per piece) of a region whose units each cost
/// `macs` multiply-adds.
pub fn grain_macs(macs: usize) -> usize {
    PIECE_MACS.div_ceil(macs.max(1))
}

/// The grain of a streaming region whose units each touch `elements`
/// elements.
pub fn grain_elements(elements: usize) -> usize {
    PIECE_ELEMENTS.div_ceil(elements.max(1))
}

/// The most threads a context takes.
pub const MAX_THREADS: usize = 1024;

/// The threads this machine runs at once (1 when unknown).
pub fn machine_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_THREADS)
}

/// A worker's slot: the piece it runs next and where it reports back.
struct Slot {
    /// [`IDLE`], [`READY`] (a piece is in `piece`), [`DONE`] or [`STOP`].
    state: AtomicU32,
    /// The piece to run; written by the caller before `READY`, read by the
    /// worker after it, so never touched by both at once.
    piece: UnsafeCell<Option<Piece>>,
    /// A panic the worker's piece raised, for the caller to rethrow.
    panic: UnsafeCell<Option<Box<dyn std::any::Any + Send>>>,
    /// The worker is parked or about to park: the caller must unpark it.
    sleeping: AtomicBool,
}

const IDLE: u32 = 0;
const READY: u32 = 1;
const DONE: u32 = 2;
const STOP: u32 = 3;

/// One piece of a region: the region's function (its lifetime erased; the
/// caller does not return before the piece is `DONE`) and the piece index.
struct Piece {
    f: *const (dyn Fn(usize) + Sync),
    index: usize,
}

// SAFETY: `piece` and `panic` are accessed by one thread at a time, handed
// over by the release/acquire stores and loads of `state`; the function
// behind `Piece::f` is `Sync`.
unsafe impl Sync for Slot {}
unsafe impl Send for Slot {}

struct Shared {
    slots: Vec<Slot>,
    /// How many installed runs use the pool now (workers spin while > 0).
    hot: AtomicUsize,
    /// A caller owns the workers for a region (another caller runs inline).
    busy: AtomicBool,
}

struct Pool {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl Pool {
    fn start(workers: usize) -> std::io::Result<Pool> {
        let slots = (0..workers)
            .map(|_| Slot {
                state: AtomicU32::new(IDLE),
                piece: UnsafeCell::new(None),
                panic: UnsafeCell::new(None),
                sleeping: AtomicBool::new(false),
            })
            .collect();
        let shared = Arc::new(Shared { slots, hot: AtomicUsize::new(0), busy: AtomicBool::new(false) });
        let mut pool = Pool { shared: shared.clone(), handles: Vec::with_capacity(workers) };
        for i in 0..workers {
            let shared = shared.clone();
            let handle = std::thread::Builder::new().name(format!("trtc-worker-{i}")).spawn(move || work(&shared, i))?;
            pool.handles.push(handle);
        }
        Ok(pool)
    }

    /// Runs `f(0)` .. `f(n - 1)`, `f(0)` on the calling thread and the rest
    /// on workers (`n - 1 <= workers`), and returns when all are done.
    /// Panics in any piece are rethrown here after every piece finished.
    fn run(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        let slots = &self.shared.slots[..n - 1];
        // SAFETY (lifetime erasure): this function does not return, nor
        // unwind, before every worker it handed `f` to has stored `DONE`,
        // after which the worker no longer touches `f`.
        let erased: *const (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(f) };
        for (i, slot) in slots.iter().enumerate() {
            debug_assert_eq!(slot.state.load(Ordering::Relaxed), IDLE);
            // SAFETY: the slot is IDLE, so its worker does not read `piece`.
            unsafe { *slot.piece.get() = Some(Piece { f: erased, index: i + 1 }) };
            slot.state.store(READY, Ordering::SeqCst);
            if slot.sleeping.load(Ordering::SeqCst) {
                self.handles[i].thread().unpark();
            }
        }
        let own = catch_unwind(AssertUnwindSafe(|| f(0)));
        let mut panic = own.err();
        for slot in slots {
            let mut spins = 0u32;
            while slot.state.load(Ordering::Acquire) != DONE {
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(YIELD_EVERY) {
                    // Where threads outnumber cores the worker may be
                    // waiting for this one's core.
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            // SAFETY: the worker stored DONE after its last access.
            if let Some(p) = unsafe { (*slot.panic.get()).take() } {
                panic.get_or_insert(p);
            }
            slot.state.store(IDLE, Ordering::Release);
        }
        if let Some(p) = panic {
            resume_unwind(p);
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for (slot, handle) in self.shared.slots.iter().zip(&self.handles) {
            slot.state.store(STOP, Ordering::SeqCst);
            handle.thread().unpark();
        }
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
    }
}

/// A worker's loop: wait for a piece in slot `i`, run it, report `DONE`.
fn work(shared: &Shared, i: usize) {
    let slot = &shared.slots[i];
    loop {
        let mut spins = 0u32;
        let mut idle_since: Option<Instant> = None;
        loop {
            match slot.state.load(Ordering::Acquire) {
                READY => break,
                STOP => return,
                _ => {}
            }
            spins = spins.wrapping_add(1);
            if !spins.is_multiple_of(YIELD_EVERY) {
                std::hint::spin_loop();
                continue;
            }
            // Another thread that wants this core (the caller or a worker,
            // where threads outnumber cores) runs first.
            std::thread::yield_now();
            let limit = if shared.hot.load(Ordering::Relaxed) > 0 { HOT_SPIN } else { COLD_SPIN };
            if idle_since.get_or_insert_with(Instant::now).elapsed() < limit {
                continue;
            }
            slot.sleeping.store(true, Ordering::SeqCst);
            // Checked again after announcing the sleep: a caller that
            // stored READY before it saw `sleeping` is seen here instead.
            if !matches!(slot.state.load(Ordering::SeqCst), READY | STOP) {
                std::thread::park();
            }
            slot.sleeping.store(false, Ordering::SeqCst);
            idle_since = None;
        }
        // SAFETY: the state is READY: the caller wrote the piece and waits
        // for DONE before touching the slot or the function again.
        let piece = unsafe { (*slot.piece.get()).take() };
        if let Some(piece) = piece {
            // SAFETY: the caller keeps the function alive until DONE.
            let result = catch_unwind(AssertUnwindSafe(|| unsafe { (*piece.f)(piece.index) }));
            if let Err(p) = result {
                // SAFETY: as for `piece`.
                unsafe { *slot.panic.get() = Some(p) };
            }
        }
        slot.state.store(DONE, Ordering::Release);
    }
}

thread_local! {
    static CURRENT: RefCell<Option<(Arc<Pool>, usize)>> = const { RefCell::new(None) };
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

/// Runs `f(piece)` for the pieces `0..n` of a region whose `units` units
/// are cut into pieces of at least `grain` units: `n` is 1 (run inline,
/// `f(0)` with `n == 1`) unless a pool is installed and free.
fn region(units: usize, grain: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    let current = CURRENT.with(|c| c.borrow().clone());
    let Some((pool, threads)) = current else { return f(0, 1) };
    let n = (units / grain.max(1)).min(threads);
    if n < 2 || pool.shared.busy.swap(true, Ordering::Acquire) {
        return f(0, 1);
    }
    struct Release<'a>(&'a AtomicBool);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            self.0.store(false, Ordering::Release);
        }
    }
    let _release = Release(&pool.shared.busy);
    SPLITS.with(|s| s.set(s.get() + 1));
    pool.run(n, &|i| f(i, n));
}

/// A pointer to data whose disjoint parts pieces of a region write.
struct Parts<T>(*mut T);
// SAFETY: each piece builds a slice over its own disjoint range only.
unsafe impl<T: Send> Sync for Parts<T> {}

/// Runs `f(first_unit, chunk)` over `data` cut into consecutive chunks of
/// whole units of `unit` elements (the last chunk also takes any partial
/// unit), in parallel when the current context has more than one thread
/// and there are at least `2 * grain` units.
pub fn par_chunks_mut<T: Send>(data: &mut [T], unit: usize, grain: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    let unit = unit.max(1);
    let units = data.len() / unit;
    let len = data.len();
    let base = Parts(data.as_mut_ptr());
    region(units, grain, &|i, n| {
        let (start, end) = (units * i / n, units * (i + 1) / n);
        let from = start * unit;
        let to = if i == n - 1 { len } else { end * unit };
        let base = &base;
        // SAFETY: the pieces' ranges `from..to` are disjoint and lie in
        // `data`, which is borrowed mutably for the whole region.
        let chunk = unsafe { std::slice::from_raw_parts_mut(base.0.add(from), to - from) };
        f(start, chunk)
    });
}

/// Runs `f` over disjoint ranges covering `0..units`, in parallel as
/// [`par_chunks_mut`] decides. For callers whose outputs are not one
/// contiguous slice per range (they must still write disjoint elements).
pub fn par_ranges(units: usize, grain: usize, f: impl Fn(Range<usize>) + Sync) {
    region(units, grain, &|i, n| f(units * i / n..units * (i + 1) / n));
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

    #[test]
    fn many_regions_in_a_row_and_after_the_workers_slept() {
        let threads = Threads::new(3).unwrap();
        let total = AtomicUsize::new(0);
        for round in 0..3 {
            threads.install(|| {
                for _ in 0..2000 {
                    par_ranges(30, 1, |r| {
                        total.fetch_add(r.len(), Ordering::Relaxed);
                    });
                }
            });
            if round == 1 {
                // Long enough for every worker to park.
                std::thread::sleep(COLD_SPIN * 20);
            }
        }
        assert_eq!(total.load(Ordering::Relaxed), 3 * 2000 * 30);
    }

    #[test]
    fn nested_regions_run_inline_on_workers() {
        let threads = Threads::new(2).unwrap();
        let inner = AtomicUsize::new(0);
        threads.install(|| {
            par_ranges(2, 1, |_| {
                par_ranges(100, 1, |r| {
                    inner.fetch_add(r.len(), Ordering::Relaxed);
                })
            })
        });
        assert_eq!(inner.load(Ordering::Relaxed), 200);
    }

    #[test]
    fn a_panicking_piece_is_rethrown_after_all_pieces_finish() {
        let threads = Threads::new(3).unwrap();
        let finished = AtomicUsize::new(0);
        let result = catch_unwind(AssertUnwindSafe(|| {
            threads.install(|| {
                par_ranges(3, 1, |r| {
                    if r.start == 1 {
                        panic!("piece 1 failed");
                    }
                    std::thread::sleep(Duration::from_millis(5));
                    finished.fetch_add(1, Ordering::SeqCst);
                })
            })
        }));
        assert!(result.is_err());
        assert_eq!(finished.load(Ordering::SeqCst), 2, "the other pieces ran to the end first");
        // The pool still works.
        let total = AtomicUsize::new(0);
        threads.install(|| {
            par_ranges(9, 1, |r| {
                total.fetch_add(r.len(), Ordering::Relaxed);
            })
        });
        assert_eq!(total.load(Ordering::Relaxed), 9);
    }
}
