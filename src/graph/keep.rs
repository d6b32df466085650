//! What graph nodes refer to, kept alive through CUDA user objects.
//!
//! Each node that refers to something (device memory, a function and its module, an event, a
//! host closure) gets one *bundle* of tokens, owned by a CUDA user object whose only reference
//! is moved to the graph (`cuUserObjectCreate` + `cuGraphRetainUserObject`). The driver copies
//! the reference to every clone and child embedding of the graph. An executable holds its own
//! references ([`ExecRefs`], taken in [`lift`] while the graph's are off it, so that the driver
//! copies none: launches stay as cheap as plain ones), released once its tracked launches are
//! done: the user object's destructor runs only once no graph, executable or launch refers to
//! the bundle any more.
//!
//! The destructor runs on a driver thread where no CUDA call is allowed, so it frees nothing:
//! it hands the bundle to the crate's queue of deferred releases, which the next call of the
//! crate that enters a device drains, on that user thread, through the bundle's ordinary drops
//! (a buffer's drop frees its memory in stream order, an event's drop destroys it, ...).

use std::ffi::c_void;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::context::{self, Active};
use crate::driver::{sys, Raw};
use crate::error::Result;

/// Something a node refers to, kept alive while the bundle lives.
pub(crate) type Token = Box<dyn Send>;

/// The tokens of one node (or of one executable's per-node updates).
pub(crate) type Bundle = Vec<Token>;

/// A token with an identity: two tokens with the same key keep the same thing alive (the key
/// is the address of a live object the token holds, tagged with its kind, so it cannot be
/// reused while the token lives). `None`: no identity (a host closure: every one is new).
pub(crate) type Key = Option<(u8, usize)>;

/// Key tags.
pub(crate) const KEY_ALLOC: u8 = 1;
pub(crate) const KEY_FUNCTION: u8 = 2;

/// Tokens with their keys, as per-node updates gather them.
pub(crate) type KeyedBundle = Vec<(Key, Token)>;

/// What per-node updates of one executable keep, without duplicates: a parameter sweep that
/// switches among the same buffers and functions keeps each once, however many updates it
/// makes. (Each host-node update's closure is new, so it is kept until the executable is
/// dropped or whole-updated.)
#[derive(Default)]
pub(crate) struct Kept {
    keys: std::collections::HashSet<(u8, usize)>,
    tokens: Vec<Token>,
}

impl Kept {
    /// Keeps `bundle`'s tokens, dropping those whose key is kept already (the kept one holds
    /// the same object).
    pub(crate) fn keep(&mut self, bundle: KeyedBundle) {
        for (key, token) in bundle {
            match key {
                Some(k) if !self.keys.insert(k) => drop(token),
                _ => self.tokens.push(token),
            }
        }
    }

    /// How many tokens are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
    }
}

/// Tokens that per-node updates of an executable add, kept by a user object that the
/// executable holds (see [`super::GraphExec`]).
pub(crate) type Accumulator = Arc<Mutex<Kept>>;

/// The user object's destructor: hands the bundle to a user thread.
unsafe extern "C" fn release_bundle(p: *mut c_void) {
    // SAFETY: `p` came from `Box::into_raw` in `attach`, and the driver runs the destructor
    // exactly once, when the last reference is released.
    let bundle = unsafe { Box::from_raw(p.cast::<Bundle>()) };
    // No allocation failure unwinds (Rust aborts on it) and the queue's lock is never held
    // across a CUDA call, so this neither panics nor blocks for long.
    context::defer_release(move || drop(bundle));
}

/// Moves `bundle` into a new user object whose one reference the graph `graph` takes over.
/// The returned handle stays valid as long as the graph (which owns the reference) lives.
pub(crate) fn attach(
    a: &Active,
    graph: sys::CUgraph,
    bundle: Bundle,
) -> Result<Raw<sys::CUuserObject_st>> {
    let p = Box::into_raw(Box::new(bundle));
    let mut obj: sys::CUuserObject = std::ptr::null_mut();
    // SAFETY: valid out-parameter; `p` is a live box that the destructor takes back once; one
    // initial reference; the only flag defined (the driver need not wait for the destructor).
    let r = a.check(
        unsafe {
            sys::cuUserObjectCreate(
                &mut obj,
                p.cast(),
                Some(release_bundle),
                1,
                sys::CUuserObject_flags_enum::CU_USER_OBJECT_NO_DESTRUCTOR_SYNC as u32,
            )
        },
        "cuUserObjectCreate",
    );
    if let Err(e) = r {
        // SAFETY: the driver refused the object, so it holds no reference to `p`.
        drop(unsafe { Box::from_raw(p) });
        return Err(e);
    }
    // SAFETY: live graph (held by the caller) and user object; the caller's one reference is
    // moved to the graph.
    let r = a.check(
        unsafe {
            sys::cuGraphRetainUserObject(
                graph,
                obj,
                1,
                sys::CUuserObjectRetain_flags_enum::CU_GRAPH_USER_OBJECT_MOVE as u32,
            )
        },
        "cuGraphRetainUserObject",
    );
    if let Err(e) = r {
        // SAFETY: the reference is still ours; releasing it runs the destructor (later, on a
        // driver thread), which hands the bundle back to a user thread.
        let _ = unsafe { sys::cuUserObjectRelease(obj, 1) };
        return Err(e);
    }
    Ok(Raw(obj))
}

/// Gives the graph `graph` one more reference to `obj`, which is alive (another live graph
/// holds it).
pub(crate) fn share(a: &Active, graph: sys::CUgraph, obj: Raw<sys::CUuserObject_st>) -> Result<()> {
    // SAFETY: live graph and user object (the caller holds a graph that owns a reference).
    a.check(
        unsafe { sys::cuGraphRetainUserObject(graph, obj.get(), 1, 0) },
        "cuGraphRetainUserObject",
    )
}

/// Takes one reference to `obj` back from `graph`.
pub(crate) fn unshare(
    a: &Active,
    graph: sys::CUgraph,
    obj: Raw<sys::CUuserObject_st>,
) -> Result<()> {
    // SAFETY: live graph that owns a reference to `obj`.
    a.check(
        unsafe { sys::cuGraphReleaseUserObject(graph, obj.get(), 1) },
        "cuGraphReleaseUserObject",
    )
}

/// The crate's user objects of a graph, taken off the graph for an instantiation or a
/// whole-graph update and given back when this is dropped, so that the executable gets no
/// reference to them: the driver makes every launch of an executable that holds a user object
/// cost about 40 times a plain launch (57.7 µs against 1.46 µs per submit on the H200, with
/// one user object or a hundred: `probes/graph_user_objects`). The executable holds its own
/// references instead ([`ExecRefs`]), released once its launches are done (it tracks them).
pub(crate) struct Lifted {
    graph: sys::CUgraph,
    /// Each object once, with the number of references the graph held.
    counts: Vec<(Raw<sys::CUuserObject_st>, u32)>,
}

/// References to user objects held by an executable graph (one per object), and the tokens of
/// its per-node updates; released when dropped.
#[derive(Default)]
pub(crate) struct ExecRefs {
    refs: Vec<Raw<sys::CUuserObject_st>>,
    /// Tokens that per-node updates of the executable add.
    pub(crate) acc: Accumulator,
}

impl Drop for ExecRefs {
    fn drop(&mut self) {
        for o in self.refs.drain(..) {
            // SAFETY: a reference this struct owns (taken in `lift`); the object's destructor,
            // if this was the last reference, runs later on a driver thread and hands the
            // bundle to a user thread. No context is needed.
            let _ = unsafe { sys::cuUserObjectRelease(o.get(), 1) };
        }
    }
}

/// Takes the user objects in `objects` (the graph's list: one entry per reference the graph
/// holds) off `graph`, after taking one reference to each for the executable. The graph gets
/// them back when the returned [`Lifted`] is dropped, which must happen while `a` is entered
/// and the graph's lock is held (as for this call).
pub(crate) fn lift(
    a: &Active,
    graph: sys::CUgraph,
    objects: &[Raw<sys::CUuserObject_st>],
) -> (ExecRefs, Lifted) {
    let mut counts: Vec<(Raw<sys::CUuserObject_st>, u32)> = Vec::new();
    for &o in objects {
        match counts.iter_mut().find(|(x, _)| x.0 == o.0) {
            Some((_, n)) => *n += 1,
            None => counts.push((o, 1)),
        }
    }
    let mut refs = ExecRefs::default();
    let mut lifted = Lifted {
        graph,
        counts: Vec::new(),
    };
    for (o, n) in counts {
        // SAFETY: a live user object (the graph holds `n` references to it).
        if a.check(
            unsafe { sys::cuUserObjectRetain(o.get(), 1) },
            "cuUserObjectRetain",
        )
        .is_err()
        {
            // Left on the graph: the executable copies the graph's reference instead (its
            // launches are slower, nothing is lost).
            continue;
        }
        refs.refs.push(o);
        // SAFETY: the graph holds `n` references to `o`; the executable's reference keeps the
        // object alive meanwhile.
        if a.check(
            unsafe { sys::cuGraphReleaseUserObject(graph, o.get(), n) },
            "cuGraphReleaseUserObject",
        )
        .is_ok()
        {
            lifted.counts.push((o, n));
        }
    }
    (refs, lifted)
}

impl Drop for Lifted {
    fn drop(&mut self) {
        for &(o, n) in &self.counts {
            // SAFETY: live graph (its lock is held by the caller of `lift`); `o` lives (the
            // executable, or the caller, holds a reference).
            let r = unsafe { sys::cuGraphRetainUserObject(self.graph, o.get(), n, 0) };
            if crate::driver::rc(r) != 0 {
                // The graph could not take its references back: the object must still never
                // die while the graph names it, so `n` references are leaked instead.
                // SAFETY: as above.
                let _ = unsafe { sys::cuUserObjectRetain(o.get(), n) };
            }
        }
    }
}

/// Runs `f` with the calling thread's capture mode relaxed (`cuThreadExchangeStreamCaptureMode`),
/// so that destroying a graph or an executable (which nothing being captured refers to: the
/// tokens guarantee it) does not invalidate a capture in global mode on another stream.
pub(crate) fn relaxed<R>(f: impl FnOnce() -> R) -> R {
    // Read and written as an integer: the driver's value never becomes a Rust enum.
    let mut mode: u32 = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED as u32;
    let p = (&mut mode as *mut u32).cast::<sys::CUstreamCaptureMode>();
    // SAFETY: a valid in/out parameter of the enum's size (a C enum, 4 bytes); the call only
    // swaps the thread's mode.
    let swapped = unsafe { sys::cuThreadExchangeStreamCaptureMode(p) };
    let r = f();
    if crate::driver::rc(swapped) == 0 {
        // SAFETY: as above; `mode` holds the thread's earlier mode, which the driver wrote.
        let _ = unsafe { sys::cuThreadExchangeStreamCaptureMode(p) };
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_tokens_are_deduplicated_by_key_and_unkeyed_ones_all_kept() {
        let a = Arc::new(1u32);
        let b = Arc::new(2u32);
        let key = |x: &Arc<u32>| Some((KEY_ALLOC, Arc::as_ptr(x) as usize));
        let mut kept = Kept::default();
        for _ in 0..100 {
            kept.keep(vec![
                (key(&a), Box::new(a.clone()) as Token),
                (key(&b), Box::new(b.clone()) as Token),
                (None, Box::new(7u8) as Token),
            ]);
        }
        // a and b once each, the 100 unkeyed tokens all.
        assert_eq!(kept.len(), 102);
        assert_eq!(Arc::strong_count(&a), 2);
        assert_eq!(Arc::strong_count(&b), 2);
        // The same address under another tag is another object.
        kept.keep(vec![(
            Some((KEY_FUNCTION, Arc::as_ptr(&a) as usize)),
            Box::new(a.clone()) as Token,
        )]);
        assert_eq!(Arc::strong_count(&a), 3);
        drop(kept);
        assert_eq!(Arc::strong_count(&a), 1);
    }
}
