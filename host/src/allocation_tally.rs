//! Test builds only: the library's unit tests run on a global allocator that, for a thread that asks
//! ([`measure`]), tallies the bytes its allocations take as glibc's malloc rounds them, so that a test
//! can hold a memory cost model to what the code really allocates. Other threads pass through
//! untallied. Reallocation is an allocation, a copy and a free, so a tally sees both buffers of a move
//! at once, as a move that cannot grow in place holds them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// What the code under [`measure`] allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// Bytes its allocations still held when it returned (what it returned included).
    pub after: u64,
    /// The most they held at once.
    pub peak: u64,
    /// Bytes asked for by the allocations still held, before the allocator's rounding.
    pub requested: u64,
    /// Allocations still held.
    pub allocations: u64,
}

/// Runs `f` and returns what it returns, with what its allocations took on this thread.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Held) {
    TALLY.with(|t| t.set(Some(Counts::default())));
    let out = f();
    let counts = TALLY.with(|t| t.take()).unwrap_or_default();
    let held = Held {
        after: counts.now.max(0) as u64,
        peak: counts.peak.max(0) as u64,
        requested: counts.requested.max(0) as u64,
        allocations: counts.allocations.max(0) as u64,
    };
    (out, held)
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    now: i64,
    peak: i64,
    requested: i64,
    allocations: i64,
}

thread_local! {
    /// What this thread holds, while it is measured.
    static TALLY: Cell<Option<Counts>> = const { Cell::new(None) };
}

/// What glibc's malloc takes for a request: an 8-byte header, rounded up to 16, at least 32; from
/// its mmap threshold on (128 KiB), whole pages and a 16-byte header.
fn chunk(size: usize) -> i64 {
    let size = size as i64;
    if size >= 128 << 10 {
        (size + 16 + 4095) / 4096 * 4096
    } else {
        ((size + 8 + 15) / 16 * 16).max(32)
    }
}

/// Counts an allocation of `size` bytes (`sign` 1) or its release (`sign` -1).
fn tally(size: usize, sign: i64) {
    let _ = TALLY.try_with(|t| {
        if let Some(mut counts) = t.get() {
            counts.now += sign * chunk(size);
            counts.peak = counts.peak.max(counts.now);
            counts.requested += sign * size as i64;
            counts.allocations += sign;
            t.set(Some(counts));
        }
    });
}

struct Tallying;

#[global_allocator]
static ALLOCATOR: Tallying = Tallying;

// SAFETY: every call is passed to the system allocator unchanged; only a thread-local count (whose
// access does not allocate) is kept beside it.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Tallying {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, passed on as `GlobalAlloc::alloc` requires it.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            tally(layout.size(), 1);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            tally(layout.size(), 1);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        tally(layout.size(), -1);
        // SAFETY: `ptr` came from `System` through `alloc` with this layout, as the caller promises.
        unsafe { System.dealloc(ptr, layout) }
    }
}
