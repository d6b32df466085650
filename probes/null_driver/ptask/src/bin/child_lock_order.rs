// Review rev-e15: `Graph::add_child_graph_node` held the child's lock while it took the lock of
// the graph it adds to (the root's, for a conditional body). Two threads, each adding the other
// root as a child of a body of its own root (all safe handles: a body is a `Graph` of its own,
// `Send`), took the two locks in opposite orders and hung forever. A child with conditional
// nodes is refused by the driver in any case ("The graph must not contain conditional nodes"):
// the call must end, with an error. (One thread embedding a root in its own body hung too.)
use std::sync::mpsc;
use std::time::Duration;

use cuda_runtime::graph::{ConditionalKind, Graph};
use cuda_runtime::Device;

use ptask::{finish, violations};

fn root_with_body() -> (Graph, Graph) {
    let mut g = Graph::new().unwrap();
    let h = g.conditional_handle(Some(0)).unwrap();
    let (_, body) = g
        .add_conditional_node(&[], h, ConditionalKind::If)
        .unwrap();
    (g, body)
}

fn main() {
    Device::current().unwrap();
    let before = violations();
    let mut bad = 0;
    // One thread: a root embedded in its own body took the root's lock twice.
    let (tx1, rx1) = mpsc::channel();
    std::thread::spawn(move || {
        let (g, mut body) = root_with_body();
        let r = body.add_child_graph_node(&[], &g).map(drop);
        tx1.send(r.map_err(|e| e.to_string())).unwrap();
        drop((g, body));
    });
    match rx1.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(())) => {
            println!("BAD: a root was embedded as a child in its own conditional body");
            bad += 1;
        }
        Ok(Err(e)) => println!("a root embedded in its own body: {e}"),
        Err(_) => {
            println!("BAD: embedding a root in its own body did not return in 30 s (deadlock)");
            bad += 1;
        }
    }
    // Two threads, each embedding the other's root in a body of its own.
    let (r, body_r) = root_with_body();
    let (s, body_s) = root_with_body();
    let rounds = 20_000;
    let (tx, rx) = mpsc::channel();
    for (mut body, child, name) in [(body_r, s, "A"), (body_s, r, "B")] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut ok = 0u32;
            let mut first_err = None;
            for _ in 0..rounds {
                match body.add_child_graph_node(&[], &child) {
                    Ok(_) => ok += 1,
                    Err(e) => {
                        first_err.get_or_insert(e.to_string());
                    }
                }
            }
            tx.send((name, ok, first_err)).unwrap();
        });
    }
    for _ in 0..2 {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok((name, ok, err)) => {
                println!("thread {name}: {ok} children added; first error: {err:?}");
                if ok > 0 {
                    println!("BAD: a graph with conditional nodes was embedded as a child");
                    bad += 1;
                }
            }
            Err(_) => {
                println!("BAD: a thread did not finish in 30 s (deadlock)");
                bad += 1;
                break;
            }
        }
    }
    finish(bad, before);
}
