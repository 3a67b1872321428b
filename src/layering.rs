//! The crate's layering, checked: which top-level module may name which, and no cycle
//! among them. Read from the sources (every `crate::<module>` outside comments), so a
//! new import that breaks a rule fails here, with the file that made it.
//!
//! The rules are the ones `docs/architecture.md` explains: the write side is a leaf
//! (it owns every table a command's transaction writes and knows nothing of who calls
//! it); telemetry and the reservation view name nothing of ours; queries and commands
//! do not know each other; and nothing depends on the HTTP layer but the process
//! around it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module -> the top-level modules it names, with a file that names each.
fn graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).expect("src is readable");
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let relative = path.strip_prefix(&root).expect("under src");
            let first = relative
                .components()
                .next()
                .and_then(|c| c.as_os_str().to_str())
                .expect("a file name");
            let module = first.trim_end_matches(".rs").to_owned();
            if matches!(module.as_str(), "lib" | "main" | "bin" | "layering") {
                continue;
            }
            let source = std::fs::read_to_string(&path).expect("a readable source file");
            for line in source.lines() {
                let code = line.split("//").next().unwrap_or("");
                for (at, _) in code.match_indices("crate::") {
                    let named: String = code[at + "crate::".len()..]
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !named.is_empty() && named != module {
                        graph
                            .entry(module.clone())
                            .or_default()
                            .entry(named)
                            .or_insert_with(|| relative.display().to_string());
                    }
                }
            }
            graph.entry(module).or_default();
        }
    }
    graph
}

fn names(graph: &BTreeMap<String, BTreeMap<String, String>>, module: &str) -> BTreeSet<String> {
    graph
        .get(module)
        .map(|deps| deps.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn the_write_side_names_nothing_but_its_error_type_and_the_privacy_layer() {
    let graph = graph();
    // The key store is written in the command's transaction and the writer seals with
    // it; the privacy layer itself names nothing that could name the write side.
    for (module, allowed) in [
        ("write", &["error", "privacy"][..]),
        ("privacy", &["error", "view"][..]),
    ] {
        let named = names(&graph, module);
        let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
        assert!(
            named.is_subset(&allowed),
            "{module} names {:?}",
            graph.get(module)
        );
    }
}

#[test]
fn telemetry_the_view_and_the_outbox_lease_name_nothing_of_ours() {
    let graph = graph();
    for module in ["telemetry", "view", "clock", "error", "outbox"] {
        assert!(
            names(&graph, module).is_empty(),
            "{module} names {:?}",
            graph.get(module)
        );
    }
}

#[test]
fn commands_and_queries_do_not_know_each_other_nor_the_http_layer() {
    let graph = graph();
    for (module, forbidden) in [
        ("commands", ["queries", "payments", "api"]),
        ("queries", ["commands", "payments", "api"]),
        ("payments", ["queries", "api", "startup"]),
    ] {
        let named = names(&graph, module);
        for other in forbidden {
            assert!(
                !named.contains(other),
                "{module} names {other} (in {:?})",
                graph.get(module).and_then(|d| d.get(other))
            );
        }
    }
}

#[test]
fn no_module_depends_on_itself_through_others() {
    let graph = graph();
    // Depth-first search for a back edge.
    fn visit(
        module: &str,
        graph: &BTreeMap<String, BTreeMap<String, String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if done.contains(module) {
            return;
        }
        if let Some(at) = path.iter().position(|m| m == module) {
            panic!("a cycle: {:?} -> {module}", &path[at..]);
        }
        path.push(module.to_owned());
        for next in graph.get(module).into_iter().flat_map(|d| d.keys()) {
            visit(next, graph, path, done);
        }
        path.pop();
        done.insert(module.to_owned());
    }
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        visit(module, &graph, &mut Vec::new(), &mut done);
    }
    // The check saw the modules it is about (a broken walk would pass vacuously).
    for expected in [
        "write",
        "commands",
        "queries",
        "payments",
        "api",
        "telemetry",
    ] {
        assert!(graph.contains_key(expected), "{expected} not found in src");
    }
}
