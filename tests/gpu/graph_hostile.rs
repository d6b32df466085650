//! Graphs against programs that try to break them: a while body changed by another thread
//! while the graph is instantiated, whole updates while the source graph changes, copies of
//! graphs with memory nodes, handles of destroyed nodes whose address a new node took, and user
//! objects released by hand while a launch that holds them is queued.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{assert_same, random_ints_f32, random_u32, rng, slow_factor, vadd_module};
use cuda_runtime::graph::{
    ConditionalKind, Graph, GraphExec, GraphNode, GraphNodeType, MemsetValue, UserObject,
};
use cuda_runtime::{kernel_args, kernels, DeviceBuffer, Error, LaunchConfig, Stream};

crate::tests![
    instantiation_never_sees_a_while_body_change_in_a_child_process,
    whole_updates_run_while_the_source_graph_changes,
    copies_of_a_graph_with_memory_nodes_are_refused_by_the_crate,
    a_destroyed_nodes_handle_stays_dead_when_its_address_is_reused,
    a_user_object_outlives_launches_queued_before_its_release_by_hand,
];

/// Tests that run in a process of their own (see `main.rs`), under a watchdog: a launch that
/// never ends there cannot take the other tests with it.
pub const CHILDREN: &[(&str, fn())] = &[(
    "graph_while_body_race",
    instantiation_never_sees_a_while_body_change,
)];

fn instantiation_never_sees_a_while_body_change_in_a_child_process() {
    let out = crate::common::run_in_child_within("graph_while_body_race", Duration::from_secs(180));
    assert!(out.contains("graph while body race passed"), "{out}");
}

/// Waits for `s` to finish, for at most `limit` (stretched under the sanitizer); false if it
/// did not.
fn finishes_within(s: &Stream, limit: Duration) -> bool {
    let end = Instant::now() + limit * slow_factor();
    loop {
        if s.query().unwrap() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A graph whose while body ends its loop (a kernel sets the value to 0) is instantiated again
/// and again while another thread, holding the body's handle, makes the loop endless: it
/// destroys the body's only kernel node, or adds a nested while node with an empty body. The
/// check that refuses endless loops and the instantiation must be one critical section: every
/// instantiation that succeeds must then be of a loop that ends. Each executable made is
/// launched; one whose launch does not end within 10 s fails the test (and the watchdog ends
/// the process). Nothing else is computed: the loop's end is the result.
fn instantiation_never_sees_a_while_body_change() {
    let mut r = rng();
    assert!(kernels::graph_cond::MODULE.uses_device_runtime());
    let set = kernels::graph_cond::COND_SET.function().unwrap();
    let s = Stream::new().unwrap();
    let rounds = 300;
    let (mut launched, mut refused_after) = (0usize, 0usize);
    let mut nested = true;
    for round in 0..rounds {
        let mut g = Graph::new().unwrap();
        let h = g.conditional_handle(Some(1)).unwrap();
        let (_, mut body) = g
            .add_conditional_node(&[], h, ConditionalKind::While)
            .unwrap();
        // SAFETY: cond_set takes the handle of a conditional of this graph and a value: 0 ends
        // the loop after one turn.
        let k = unsafe {
            body.add_kernel_node(
                &[],
                &set,
                &LaunchConfig::new(1u32, 1u32),
                &kernel_args![h, 0u32],
            )
        }
        .unwrap();
        // A few more nodes make the check (one driver call per node) a larger target.
        for _ in 0..r.usize(0..8) {
            body.add_empty_node(&[]).unwrap();
        }
        // Odd rounds add a nested endless loop instead (when the driver makes nested nodes).
        let add_nested = nested && round % 2 == 1;
        let nested_handle = if add_nested {
            match body.conditional_handle(Some(1)) {
                Ok(h2) => Some(h2),
                Err(e) => {
                    eprintln!("no nested conditional handle ({e}): the destroy race only");
                    nested = false;
                    None
                }
            }
        } else {
            None
        };
        let delay = Duration::from_micros(r.u64(0..400));
        let started = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let changer = {
            let (started, done) = (started.clone(), done.clone());
            std::thread::spawn(move || {
                while !started.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                let t = Instant::now();
                while t.elapsed() < delay {
                    std::hint::spin_loop();
                }
                let r = match nested_handle {
                    Some(h2) => body
                        .add_conditional_node(&[], h2, ConditionalKind::While)
                        .map(|_| ()),
                    None => body.destroy_node(k),
                };
                done.store(true, Ordering::Release);
                (body, r)
            })
        };
        let mut execs: Vec<GraphExec> = Vec::new();
        started.store(true, Ordering::Release);
        // Until refused, or once more after the change is done.
        let refusal = loop {
            let was_done = done.load(Ordering::Acquire);
            match g.instantiate() {
                Ok(e) => execs.push(e),
                Err(e) => break Some(e),
            }
            if was_done {
                break None;
            }
        };
        let (body, changed) = changer.join().unwrap();
        drop(body);
        match (changed, refusal) {
            (Ok(()), Some(Error::InvalidValue { reason, .. })) if reason.contains("while") => {
                refused_after += 1
            }
            // The driver refuses the changed graph itself (an empty while body, nested
            // conditional nodes, or a handle made before its node): as sound.
            (Ok(()), Some(Error::Cuda { .. } | Error::GraphInstantiate { .. })) => {
                refused_after += 1
            }
            (Ok(()), Some(other)) => panic!("instantiation refused for another reason: {other}"),
            (Ok(()), None) => panic!(
                "round {round}: instantiated after the body's loop became endless (never \
                 launched)"
            ),
            (Err(e), _) if nested_handle.is_some() => {
                // The driver makes no nested conditional node: nothing changed, and this kind
                // of round tests nothing.
                eprintln!("nested while node refused by the driver ({e}): the destroy race only");
                nested = false;
            }
            (Err(e), refusal) => panic!("changing the body: {e} (instantiation: {refusal:?})"),
        }
        for e in &execs {
            e.launch(&s).unwrap();
        }
        assert!(
            finishes_within(&s, Duration::from_secs(10)),
            "round {round}: one of {} executables was instantiated with an endless while loop \
             (the body changed between the check and the instantiation)",
            execs.len()
        );
        launched += execs.len();
        s.synchronize().unwrap();
    }
    assert!(
        refused_after * 2 >= rounds,
        "{refused_after} of {rounds} rounds ran"
    );
    println!(
        "{launched} executables launched in {rounds} rounds, every loop ended (nested rounds: \
         {nested}); graph while body race passed"
    );
}

/// An executable is updated as a whole, from two graphs in turn, and launched, while another
/// thread changes its source graph (adds and destroys nodes, changes the kernel node's
/// parameters): the update and the source's changes are serialised by the source's lock. Each
/// launch's result is the CPU's for the graph the executable was last updated from.
fn whole_updates_run_while_the_source_graph_changes() {
    let mut r = rng();
    let n = 4099;
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 128).unwrap();
    let (ha, hb, hc) = (
        random_ints_f32(&mut r, n),
        random_ints_f32(&mut r, n),
        random_ints_f32(&mut r, n),
    );
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let c = DeviceBuffer::from_slice(&hc).unwrap();
    let mut out = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut scratch = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    // Two graphs of one kernel node each: out = a + b, out = a + c.
    let one = |x: &DeviceBuffer<f32>, out: &mut DeviceBuffer<f32>| {
        let mut g = Graph::new().unwrap();
        // SAFETY: vadd stays below the lengths given.
        unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, x, n, out, n]) }.unwrap();
        g
    };
    let gb = one(&b, &mut out);
    let gc = one(&c, &mut out);
    let mut source = Graph::new().unwrap();
    // SAFETY: as above (into a buffer of its own: the source's changes never run).
    let k = unsafe {
        source.add_kernel_node(
            &[],
            &vadd,
            &cfg,
            &kernel_args![&a, n, &b, n, &mut scratch, n],
        )
    }
    .unwrap();
    let mut exec = source.instantiate().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let changer = {
        let stop = stop.clone();
        let vadd = vadd.clone();
        std::thread::spawn(move || {
            let mut changes = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let e = source.add_empty_node(&[k]).unwrap();
                // (Not every time: each change keeps a bundle until the graph goes.)
                if changes.is_multiple_of(16) {
                    // SAFETY: as above.
                    unsafe {
                        source.set_kernel_node_params(
                            k,
                            &vadd,
                            &cfg,
                            &kernel_args![&a, n, &b, n, &mut scratch, n],
                        )
                    }
                    .unwrap();
                }
                source.destroy_node(e).unwrap();
                changes += 1;
                std::thread::yield_now();
            }
            changes
        })
    };
    let s = Stream::new().unwrap();
    let want_b: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    let want_c: Vec<f32> = ha.iter().zip(&hc).map(|(x, y)| x + y).collect();
    let end = Instant::now() + Duration::from_millis(500);
    let mut updates = 0usize;
    while Instant::now() < end || updates < 20 {
        let (g, want) = if updates.is_multiple_of(2) {
            (&gb, &want_b)
        } else {
            (&gc, &want_c)
        };
        exec.update(g).unwrap();
        exec.launch(&s).unwrap();
        s.synchronize().unwrap();
        if updates.is_multiple_of(8) {
            assert_same("after a whole update", &out.to_vec().unwrap(), want);
        }
        updates += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let changes = changer.join().unwrap();
    println!("{updates} whole updates while the source changed {changes} times");
}

/// A graph with memory nodes is not copied: `try_clone` and `add_child_graph_node` refuse it
/// with the crate's own error (the copy would have none of the crate's record of its graph
/// memory), not the driver's. The graph itself runs: its result is checked against the value.
fn copies_of_a_graph_with_memory_nodes_are_refused_by_the_crate() {
    let mut r = rng();
    let n = 1 + r.usize(..5000);
    let v = r.u32(..);
    let mut out = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let mut g = Graph::new().unwrap();
    let (_, mut tmp) = g.add_mem_alloc_node::<u32>(&[], n).unwrap();
    let set = g
        .add_graph_mem_memset_node(&[], &mut tmp, MemsetValue::U32(v))
        .unwrap();
    let copy = g
        .add_memcpy_node_from_graph_mem(&[set], &mut out, &tmp)
        .unwrap();
    g.add_mem_free_node(&[copy], tmp).unwrap();
    let crate_refusal = |what: &str, e: Error| match e {
        Error::InvalidValue { value, .. } if value.contains("memory allocation or free nodes") => {}
        other => panic!("{what}: not the crate's refusal: {other:?}"),
    };
    crate_refusal("try_clone", g.try_clone().unwrap_err());
    let mut parent = Graph::new().unwrap();
    crate_refusal(
        "add_child_graph_node",
        parent.add_child_graph_node(&[], &g).unwrap_err(),
    );
    assert!(parent.nodes().unwrap().is_empty());
    let exec = g.instantiate().unwrap();
    let s = Stream::new().unwrap();
    exec.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert_same(
        "graph memory copied out",
        &out.to_vec().unwrap(),
        &vec![v; n],
    );
}

/// Every call through `node`'s handle is refused as a destroyed node's, before the driver.
fn assert_dead(g: &mut Graph, exec: &mut GraphExec, node: GraphNode, other: GraphNode) {
    let dead = |what: &str, e: Error| match &e {
        Error::InvalidValue { reason, .. } if reason.contains("destroyed") => {}
        _ => panic!("{what} through a destroyed node's handle: {e:?}"),
    };
    dead("node_type", g.node_type(node).unwrap_err());
    dead(
        "kernel_node_params",
        g.kernel_node_params(node).unwrap_err(),
    );
    dead("dependencies", g.dependencies(node).unwrap_err());
    dead("dependents", g.dependents(node).unwrap_err());
    dead(
        "kernel_node_priority",
        g.kernel_node_priority(node).unwrap_err(),
    );
    dead("add_empty_node", g.add_empty_node(&[node]).unwrap_err());
    dead(
        "add_dependencies",
        g.add_dependencies(&[node], &[other]).unwrap_err(),
    );
    dead("destroy_node", g.destroy_node(node).unwrap_err());
    dead("exec.node_enabled", exec.node_enabled(node).unwrap_err());
    dead(
        "exec.set_node_enabled",
        exec.set_node_enabled(node, false).unwrap_err(),
    );
}

/// A kernel node is destroyed, then kernel nodes are added until one gets its raw handle (the
/// driver reuses addresses; at most 256 tries). Every call through the old handle, on the graph
/// and on an executable made before, is refused as a destroyed node's; the new node's handle is
/// another, works on the graph, and is refused by the old executable (the driver would take it
/// for the destroyed node's copy). Both executables compute what the CPU does.
fn a_destroyed_nodes_handle_stays_dead_when_its_address_is_reused() {
    let mut r = rng();
    let n = 3001;
    let m = vadd_module();
    let vadd = m.function("vadd").unwrap();
    let cfg = LaunchConfig::for_elements(n, 128).unwrap();
    let (ha, hb) = (random_ints_f32(&mut r, n), random_ints_f32(&mut r, n));
    let v = r.u32(..);
    let a = DeviceBuffer::from_slice(&ha).unwrap();
    let b = DeviceBuffer::from_slice(&hb).unwrap();
    let mut c = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut d = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
    let mut e = DeviceBuffer::from_slice(&vec![f32::NAN; n]).unwrap();
    let mut g = Graph::new().unwrap();
    // SAFETY: vadd stays below the lengths given.
    let old =
        unsafe { g.add_kernel_node(&[], &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, n]) }
            .unwrap();
    let set = g.add_memset_node(&[], &mut d, MemsetValue::U32(v)).unwrap();
    let mut before = g.instantiate().unwrap();
    g.destroy_node(old).unwrap();
    // New kernel nodes (e = b + a, each after the one before) until one has the old address.
    let mut reused = None;
    let mut prev: Vec<GraphNode> = Vec::new();
    for _ in 0..256 {
        // SAFETY: as above.
        let k = unsafe {
            g.add_kernel_node(&prev, &vadd, &cfg, &kernel_args![&b, n, &a, n, &mut e, n])
        }
        .unwrap();
        prev = vec![k];
        if k.as_raw() == old.as_raw() {
            reused = Some(k);
            break;
        }
    }
    assert_dead(&mut g, &mut before, old, set);
    // SAFETY: as above.
    let update = unsafe {
        before.set_kernel_node_params(old, &vadd, &cfg, &kernel_args![&a, n, &b, n, &mut c, n])
    };
    match update {
        Err(Error::InvalidValue { reason, .. }) if reason.contains("destroyed") => {}
        other => panic!("executable update through a destroyed node's handle: {other:?}"),
    }
    match reused {
        Some(new) => {
            println!("the destroyed node's address was given to a new node");
            assert_ne!(new, old);
            assert_eq!(g.node_type(new).unwrap(), GraphNodeType::Kernel);
            // SAFETY: as above.
            let r = unsafe {
                before.set_kernel_node_params(
                    new,
                    &vadd,
                    &cfg,
                    &kernel_args![&b, n, &a, n, &mut e, n],
                )
            };
            match r {
                Err(Error::InvalidValue { reason, .. })
                    if reason.contains("after the executable") => {}
                other => panic!(
                    "a node added after instantiation, through the old executable: {other:?}"
                ),
            }
        }
        None => println!("the driver gave no new node the destroyed node's address in 256 adds"),
    }
    let after = g.instantiate().unwrap();
    let s = Stream::new().unwrap();
    before.launch(&s).unwrap();
    after.launch(&s).unwrap();
    s.synchronize().unwrap();
    let sum: Vec<f32> = ha.iter().zip(&hb).map(|(x, y)| x + y).collect();
    let sum_ba: Vec<f32> = hb.iter().zip(&ha).map(|(x, y)| x + y).collect();
    assert_same(
        "the old executable's copy of the destroyed node",
        &c.to_vec().unwrap(),
        &sum,
    );
    assert_same("the new nodes", &e.to_vec().unwrap(), &sum_ba);
    assert_same("memset", &d.to_vec().unwrap(), &vec![v; n]);
}

/// The value of a user object: notes its drop.
struct Noted(Arc<AtomicBool>);

impl Drop for Noted {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Sets its flag when dropped.
struct EndsHold(Arc<AtomicBool>);

impl Drop for EndsHold {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// How the graph lets go of the user object after the launch is queued.
#[derive(Clone, Copy, Debug)]
enum LetGo {
    /// Released by hand; the executable and graph stay.
    Release,
    /// Released by hand, then the executable and the graph dropped.
    ReleaseAndDrop,
    /// Released by hand, then the executable updated as a whole from a graph without it.
    ReleaseAndUpdate,
}

/// A graph retains a user object by hand; a launch of its executable is queued behind a host
/// function that holds the stream; the graph releases the object by hand (then, in turn, the
/// executable and graph are dropped, or the executable is updated from a graph without it) and
/// the object's handle is dropped. While the stream is held the value must stay alive (the
/// queued launch holds it): other crate calls, which release what finished graphs held, run
/// meanwhile. Once the hold ends, the graph's host node must see the value alive, the graph's
/// memset must have run (its random value checked), and the value must then go.
fn a_user_object_outlives_launches_queued_before_its_release_by_hand() {
    let mut r = rng();
    let n = 1 + r.usize(..4096);
    for how in [
        LetGo::Release,
        LetGo::ReleaseAndDrop,
        LetGo::ReleaseAndUpdate,
    ] {
        let v = r.u32(..);
        let mut buf = DeviceBuffer::from_slice(&random_u32(&mut r, n)).unwrap();
        let mut spare = DeviceBuffer::<u32>::new(n).unwrap();
        let dropped = Arc::new(AtomicBool::new(false));
        let obj = UserObject::new(Noted(dropped.clone())).unwrap();
        let (seen_alive, seen_dropped) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut g = Graph::new().unwrap();
        let set = g
            .add_memset_node(&[], &mut buf, MemsetValue::U32(v))
            .unwrap();
        {
            let (dropped, alive, gone) =
                (dropped.clone(), seen_alive.clone(), seen_dropped.clone());
            g.add_host_node(&[set], move || {
                if dropped.load(Ordering::SeqCst) {
                    gone.fetch_add(1, Ordering::SeqCst);
                } else {
                    alive.fetch_add(1, Ordering::SeqCst);
                }
            })
            .unwrap();
        }
        g.retain_user_object(&obj).unwrap();
        let exec = g.instantiate().unwrap();
        // The hold: a host function that waits for the release (bounded).
        let s = Stream::new().unwrap();
        let (release, timed_out) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        {
            let (release, timed_out) = (release.clone(), timed_out.clone());
            let limit = Duration::from_secs(30) * slow_factor();
            s.launch_host_fn(move || {
                let end = Instant::now() + limit;
                while !release.load(Ordering::SeqCst) {
                    if Instant::now() > end {
                        timed_out.store(true, Ordering::SeqCst);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
            .unwrap();
        }
        // Ends the hold if a check below fails (other tests' host functions may wait for it).
        let _ends_hold = EndsHold(release.clone());
        exec.launch(&s).unwrap();
        g.release_user_object(&obj).unwrap();
        drop(obj);
        // What stays after the release, by variant.
        let (mut exec, mut g) = (Some(exec), Some(g));
        let mut updated_from = None;
        match how {
            LetGo::Release => {}
            LetGo::ReleaseAndDrop => drop((exec.take(), g.take())),
            LetGo::ReleaseAndUpdate => {
                let mut g2 = Graph::new().unwrap();
                let set2 = g2
                    .add_memset_node(&[], &mut spare, MemsetValue::U32(v))
                    .unwrap();
                g2.add_host_node(&[set2], || {}).unwrap();
                exec.as_mut().unwrap().update(&g2).unwrap();
                drop(g.take());
                updated_from = Some(g2);
            }
        }
        // Crate calls (each releases what finished graphs held) while the stream is held.
        let idle = Stream::new().unwrap();
        for _ in 0..40 {
            assert!(idle.query().unwrap());
            std::thread::sleep(Duration::from_millis(5));
        }
        let early = dropped.load(Ordering::SeqCst);
        release.store(true, Ordering::SeqCst);
        s.synchronize().unwrap();
        assert!(
            !timed_out.load(Ordering::SeqCst),
            "{how:?}: the hold timed out (the test's own timing failed)"
        );
        assert!(
            !early,
            "{how:?}: the value was dropped while a launch that holds it was queued"
        );
        assert_eq!(
            (
                seen_alive.load(Ordering::SeqCst),
                seen_dropped.load(Ordering::SeqCst)
            ),
            (1, 0),
            "{how:?}: times the host node saw the value (alive, dropped)"
        );
        assert_same(
            &format!("{how:?}: memset"),
            &buf.to_vec().unwrap(),
            &vec![v; n],
        );
        if let LetGo::Release = how {
            // The executable still holds the value (its own reference).
            for _ in 0..10 {
                assert!(idle.query().unwrap());
                std::thread::sleep(Duration::from_millis(5));
            }
            assert!(
                !dropped.load(Ordering::SeqCst),
                "{how:?}: the value was dropped while an executable holds it"
            );
        }
        drop((exec, g, updated_from));
        crate::common::eventually(
            &format!("{how:?}: the value dropped after its last use"),
            || dropped.load(Ordering::SeqCst),
        );
    }
}
