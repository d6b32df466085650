//! What graph nodes refer to, kept alive through CUDA user objects.
//!
//! Each node that refers to something (device memory, a function and its module, an event, a
//! host closure) gets one *bundle* of tokens, owned by a CUDA user object whose only reference
//! the crate owns in the graph's [`Refs`] (`cuUserObjectCreate`; the driver's graph is given no
//! reference, see [`Refs`]). Executables and copies of the graph share the chain (a snapshot,
//! no driver call), a graph embedding another keeps the other's chain, and an executable
//! releases its snapshot once its tracked launches are done: the user object's destructor runs
//! only once no graph, executable or launch refers to the bundle any more.
//!
//! The destructor runs on a driver thread where no CUDA call is allowed, so it frees nothing:
//! it hands the bundle to the crate's queue of deferred releases, which the next call of the
//! crate that enters a device drains, on that user thread, through the bundle's ordinary drops
//! (a buffer's drop frees its memory in stream order, an event's drop destroys it, ...).

use std::ffi::c_void;
use std::sync::Arc;

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

/// Key tags. (0 is no key's tag: [`Kept`]'s empty slots of recent keys hold it.)
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
    keys: std::collections::HashSet<(u8, usize), std::hash::BuildHasherDefault<AddrHasher>>,
    /// The last keys [`keep_with`](Self::keep_with) looked up, each in `keys` (slots never
    /// written hold tag 0, no key's tag; keys are never removed): an update that names what
    /// the last ones named (a sweep of scalars, the same function and buffers) finds them here
    /// with a few compares instead of hashing each (about 70 instructions a key before). Only
    /// kernel-node updates call `keep_with`, after their checks, so these keys are also the
    /// [checked](Self::checked) ones.
    recent: [(u8, usize); RECENT],
    /// The slot of `recent` the next key looked up goes to (round robin).
    next: usize,
    /// The last launch configuration a kernel-node update of this executable found within
    /// the device's limits (which never change). At first the default, one block of one
    /// thread without shared memory: within every device's limits. (Compared whole, which
    /// costs less than checking it again.)
    pub(crate) config: crate::launch::LaunchConfig,
    /// The driver's parameters of the last short kernel-node update: its function and `config`
    /// (the argument list is set for each call). Built again when either changes.
    pub(crate) params: NodeParams,
    tokens: Vec<Token>,
}

/// A kernel node's driver parameters kept between calls ([`Kept::params`]): a function
/// handle, the launch shape, and pointers that each call writes before it passes the struct
/// (its argument list) or leaves null. At first all zero: no function.
pub(crate) struct NodeParams(pub(crate) sys::CUDA_KERNEL_NODE_PARAMS);

impl Default for NodeParams {
    fn default() -> NodeParams {
        let null: *mut c_void = std::ptr::null_mut();
        NodeParams(sys::CUDA_KERNEL_NODE_PARAMS {
            func: null.cast(),
            gridDimX: 0,
            gridDimY: 0,
            gridDimZ: 0,
            blockDimX: 0,
            blockDimY: 0,
            blockDimZ: 0,
            sharedMemBytes: 0,
            kernelParams: null.cast(),
            extra: null.cast(),
            kern: null.cast(),
            ctx: null.cast(),
        })
    }
}

// SAFETY: the struct is plain data: a driver function handle (usable from any thread) and
// pointers that are never followed outside the call that wrote them, on the thread that holds
// the executable (`&mut`).
unsafe impl Send for NodeParams {}

/// How many keys [`Kept`] remembers as recent.
const RECENT: usize = 4;

/// A hasher for keys made of addresses and tags (multiply-rotate, as rustc's `FxHasher`):
/// a per-node update hashes one key per token, and SipHash's cost showed in its figure. Keys
/// are never chosen by an adversary (they are the addresses of the crate's own objects).
#[derive(Default, Clone, Copy)]
pub(crate) struct AddrHasher(u64);

impl AddrHasher {
    #[inline]
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for AddrHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(b as u64);
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Kept {
    /// Whether nothing is kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.tokens.is_empty() && self.keys.is_empty()
    }

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

    /// Whether `key` names a function or allocation that a kernel-node update of this
    /// executable checked (`graph::nodes::check_kernel_node`) and kept, among the last few.
    /// Those checks then hold still: what they test (the context, the kind of memory, that a
    /// stream-ordered allocation was made) never changes for a live object, and the kept token
    /// holds the object, so the key names no other meanwhile. (`GraphExec`'s fast update.)
    #[inline]
    pub(crate) fn checked(&self, key: (u8, usize)) -> bool {
        self.recent.contains(&key)
    }

    /// Keeps the token `make` gives, unless `key` is kept already (then `make` is not called).
    /// Only for what a kernel-node update checked for this executable's context: `key`
    /// becomes a [checked](Self::checked) one.
    #[inline]
    pub(crate) fn keep_with(&mut self, key: Key, make: impl FnOnce() -> Token) {
        if let Some(k) = key {
            if self.recent.contains(&k) {
                return;
            }
            let new = self.keys.insert(k);
            self.recent[self.next] = k;
            self.next = (self.next + 1) % RECENT;
            if !new {
                return;
            }
        }
        self.tokens.push(make());
    }

    /// How many tokens are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
    }
}

/// Tokens that per-node updates of an executable add (see [`super::GraphExec`]): reached only
/// through `&mut GraphExec` (an executable is `Send`, not `Sync`), so without a lock.
pub(crate) type Accumulator = Kept;

/// The user object's destructor: hands the bundle to a user thread.
unsafe extern "C" fn release_bundle(p: *mut c_void) {
    // SAFETY: `p` came from `Box::into_raw` in `attach`, and the driver runs the destructor
    // exactly once, when the last reference is released.
    let bundle = unsafe { Box::from_raw(p.cast::<Bundle>()) };
    // No allocation failure unwinds (Rust aborts on it) and the queue's lock is never held
    // across a CUDA call, so this neither panics nor blocks for long.
    context::defer_release(move || drop(bundle));
}

/// Moves `bundle` into a new user object and returns its one reference, for the caller to
/// push into a graph's [`Refs`] (under the graph's lock). The driver's graph is not given the
/// reference (see [`Refs`]).
pub(crate) fn attach(a: &Active, bundle: Bundle) -> Result<Raw<sys::CUuserObject_st>> {
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
    Ok(Raw(obj))
}

/// Releases a reference [`attach`] returned that was not pushed into any chain (the node it
/// was made for was not added).
pub(crate) fn unshare(a: &Active, obj: Raw<sys::CUuserObject_st>) -> Result<()> {
    // SAFETY: a reference the caller owns; the destructor runs later on a driver thread.
    a.check(
        unsafe { sys::cuUserObjectRelease(obj.get(), 1) },
        "cuUserObjectRelease",
    )
}

/// References to user objects that the crate owns (one driver reference each), held by a graph
/// and shared, without a driver call, by the executables and copies made from it: a chain of
/// segments, each releasing its references (`cuUserObjectRelease`) when its last holder drops
/// it. Adding to a chain that is shared starts a new segment, so a snapshot never changes.
///
/// The graph itself (in the driver) holds none of these references: an executable that holds
/// any user object makes every launch cost about 40 times a plain one (57.7 µs against 1.46 µs
/// per submit on the H200, with one user object or a hundred: `probes/graph_user_objects`).
#[derive(Clone, Default)]
pub(crate) struct Refs {
    head: Option<Arc<Seg>>,
}

struct Seg {
    refs: Vec<Raw<sys::CUuserObject_st>>,
    /// Whole chains of other graphs kept too (an embedded child graph's).
    subs: Vec<Refs>,
    prev: Option<Arc<Seg>>,
}

impl Drop for Seg {
    fn drop(&mut self) {
        for o in self.refs.drain(..) {
            #[cfg(test)]
            if (o.0 as usize) < 0x1000 {
                // A stand-in handle of the unit tests (no driver there): counted, not released.
                tests::RELEASED.fetch_add(o.0 as usize, std::sync::atomic::Ordering::SeqCst);
                continue;
            }
            // SAFETY: a reference this segment owns; the object's destructor, if this was the
            // last reference, runs later on a driver thread and hands the bundle to a user
            // thread. No context is needed.
            let _ = unsafe { sys::cuUserObjectRelease(o.get(), 1) };
        }
        // The rest of the chain and the chains it keeps, without recursion: a chain may be
        // long, and kept chains nest as deep as a graph's history of clones and embeddings
        // (each clone keeps its source's chain; review rev-e15: dropping the last of 200 000
        // successive clones overflowed the stack). A segment whose last holder is this one is
        // emptied here, so that its own drop finds nothing more to follow.
        let mut stack: Vec<Arc<Seg>> = Vec::new();
        stack.extend(self.prev.take());
        stack.extend(self.subs.drain(..).filter_map(|r| r.head));
        while let Some(seg) = stack.pop() {
            if let Ok(mut seg) = Arc::try_unwrap(seg) {
                stack.extend(seg.prev.take());
                stack.extend(seg.subs.drain(..).filter_map(|r| r.head));
                // `seg` drops here: it releases its own references and follows nothing.
            }
        }
    }
}

impl Refs {
    /// The head segment, made unshared first (a new segment when a snapshot holds it).
    fn head_mut(&mut self) -> &mut Seg {
        if self.head.as_mut().and_then(Arc::get_mut).is_none() {
            let prev = self.head.take();
            self.head = Some(Arc::new(Seg {
                refs: Vec::new(),
                subs: Vec::new(),
                prev,
            }));
        }
        Arc::get_mut(self.head.as_mut().expect("just set")).expect("unshared")
    }

    /// Takes over one reference to `obj`.
    pub(crate) fn push(&mut self, obj: Raw<sys::CUuserObject_st>) {
        self.head_mut().refs.push(obj);
    }

    /// Keeps everything `other` keeps, as long as this chain lives.
    pub(crate) fn keep_all(&mut self, other: &Refs) {
        if other.head.is_some() {
            self.head_mut().subs.push(other.clone());
        }
    }

    /// How many references the chain owns itself (not counting kept chains).
    #[cfg(test)]
    fn own_len(&self) -> usize {
        let mut n = 0;
        let mut at = self.head.as_deref();
        while let Some(seg) = at {
            n += seg.refs.len();
            at = seg.prev.as_deref();
        }
        n
    }
}

/// What an executable graph keeps: a snapshot of its graph's references, references of its own
/// to the user objects its graph holds by hand, and the tokens of its per-node updates;
/// released when dropped (after its launches: see `GraphExec`).
#[derive(Default)]
pub(crate) struct ExecRefs {
    /// Held for its drop.
    #[allow(dead_code)]
    pub(crate) refs: Refs,
    /// Held for its drop.
    #[allow(dead_code)]
    pub(crate) hand: HandRefs,
    /// Tokens that per-node updates of the executable add.
    pub(crate) acc: Accumulator,
}

/// References the crate owns to the user objects a graph holds by hand
/// ([`Graph::retain_user_object`](super::Graph::retain_user_object)), one per object, taken for
/// an executable made or updated from the graph: the objects then outlive the executable's
/// launches, which the crate tracks, whatever the graph releases meanwhile, without relying on
/// the driver's references of executables and launches. Released when dropped.
#[derive(Default)]
pub(crate) struct HandRefs(Vec<Raw<sys::CUuserObject_st>>);

impl HandRefs {
    /// Takes one reference to each user object of `objects`, which a live graph holds, by hand,
    /// under its lock (so that none is released meanwhile).
    pub(crate) fn take(a: &Active, objects: &[usize]) -> Result<HandRefs> {
        let mut refs = HandRefs(Vec::with_capacity(objects.len()));
        for &o in objects {
            let obj = Raw(o as sys::CUuserObject);
            // SAFETY: a live user object (the graph holds a reference that cannot go while
            // its lock is held); one new reference, which `refs` owns (released by its drop,
            // on an error below too).
            a.check(
                unsafe { sys::cuUserObjectRetain(obj.get(), 1) },
                "cuUserObjectRetain",
            )?;
            refs.0.push(obj);
        }
        Ok(refs)
    }
}

impl Drop for HandRefs {
    fn drop(&mut self) {
        for o in self.0.drain(..) {
            // SAFETY: a reference this value owns; the object's destructor, if this was the
            // last reference, hands the value to a user thread. No context is needed.
            let _ = unsafe { sys::cuUserObjectRelease(o.get(), 1) };
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
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The sum of the stand-in handles (addresses below 0x1000) released so far.
    pub(super) static RELEASED: AtomicUsize = AtomicUsize::new(0);

    /// Held by the tests that read [`RELEASED`] (they run in parallel otherwise).
    static SERIAL: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

    fn fake(n: usize) -> Raw<sys::CUuserObject_st> {
        Raw(n as *mut sys::CUuserObject_st)
    }

    #[test]
    fn snapshots_never_change_and_each_reference_is_released_once_by_its_last_holder() {
        let _serial = SERIAL.lock();
        // Distinct powers of two per reference: the sum names which were released.
        let released = || RELEASED.load(Ordering::SeqCst);
        let before = released();
        let mut graph = Refs::default();
        graph.push(fake(1));
        graph.push(fake(2));
        // An executable's snapshot: later pushes start a new segment.
        let exec = graph.clone();
        graph.push(fake(4));
        assert_eq!(graph.own_len(), 3);
        assert_eq!(exec.own_len(), 2);
        // A child's chain kept by a parent outlives the child.
        let mut child = Refs::default();
        child.push(fake(8));
        let mut parent = Refs::default();
        parent.keep_all(&child);
        parent.keep_all(&Refs::default());
        drop(child);
        drop(graph);
        // Only the reference no snapshot holds (4) went.
        assert_eq!(released() - before, 4);
        drop(exec);
        assert_eq!(released() - before, 4 + 1 + 2);
        drop(parent);
        assert_eq!(released() - before, 4 + 1 + 2 + 8);
        // A long chain of snapshots drops without recursion.
        let mut long = Refs::default();
        let mut snaps = Vec::new();
        for _ in 0..100_000 {
            long.push(fake(16));
            snaps.push(long.clone());
        }
        drop(snaps);
        drop(long);
        assert_eq!(released() - before, 15 + 16 * 100_000);
    }

    #[test]
    fn deeply_nested_chains_drop_without_recursion() {
        // Review rev-e15: each `Graph::try_clone` (and each child embedding) keeps the source's
        // whole chain as a sub-chain, so cloning the latest clone and dropping the older one
        // nests chains as deep as the number of clones; the last drop recursed once per level
        // and overflowed the stack (a crash from safe code).
        let _serial = SERIAL.lock();
        let released = || RELEASED.load(Ordering::SeqCst);
        let before = released();
        let depth = 200_000;
        let mut current = Refs::default();
        current.push(fake(32));
        for _ in 0..depth {
            let mut next = Refs::default();
            next.keep_all(&current);
            current = next;
        }
        // Dropped on a thread with a small stack: a recursion per level cannot fit.
        std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || drop(current))
            .unwrap()
            .join()
            .expect("the nested chain's drop overflowed the stack");
        assert_eq!(released() - before, 32);
    }

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

    #[test]
    fn keep_with_makes_a_token_only_for_a_new_key() {
        let a = Arc::new(7u32);
        let mut kept = Kept::default();
        let mut made = 0;
        for key in [
            Some((KEY_FUNCTION, 0x10)),
            Some((KEY_FUNCTION, 0x10)),
            None,
            None,
        ] {
            kept.keep_with(key, || {
                made += 1;
                Box::new(a.clone())
            });
        }
        // One for the key (twice given), one for each keyless token.
        assert_eq!(made, 3);
        assert_eq!(kept.len(), 3);
        assert_eq!(Arc::strong_count(&a), 4);
        // A key already kept through `keep` is not made again either.
        kept.keep(vec![(Some((KEY_ALLOC, 0x20)), Box::new(a.clone()))]);
        kept.keep_with(Some((KEY_ALLOC, 0x20)), || unreachable!("the key is kept"));
        assert_eq!(kept.len(), 4);
        // More keys than the recent ones, in turns: each still made once, then found (in the
        // recent ones or the set).
        for round in 0..3 {
            for i in 1..=9usize {
                kept.keep_with(Some((KEY_ALLOC, 0x100 * i)), || {
                    assert_eq!(round, 0, "key {i} made again");
                    Box::new(a.clone())
                });
            }
        }
        assert_eq!(kept.len(), 13);
        drop(kept);
        assert_eq!(Arc::strong_count(&a), 1);
    }
}
