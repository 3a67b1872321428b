//! The workspace's layering, checked where Cargo cannot say it.
//!
//! Cargo already refuses a cycle between crates; what it cannot refuse is a new
//! dependency that runs sideways or skips a layer on purpose (the storage depending on
//! the read side, say), nor an import between two modules of one crate. So this checks
//! two things, from the sources:
//!
//! - each crate of ours depends on exactly the crates of ours its layer allows
//!   (`aggregates` → `projections`, `store` → `app` → `api` → the binary; `columns`,
//!   the typed binding of row sets, under the crates that write SQL);
//! - inside a crate, which top-level module may name which (every `crate::<module>`
//!   outside comments), and no cycle among them: the unit of work names nothing but its
//!   error type and the privacy layer; commands and queries do not know each other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The crates of ours a manifest depends on (its `path` dependencies), normal
/// dependencies only.
fn path_dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).expect("a readable manifest");
    let mut section = String::new();
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line.to_owned();
            continue;
        }
        if section == "[dependencies]" && line.contains("path =") {
            if let Some((name, _)) = line.split_once('=') {
                found.insert(name.trim().to_owned());
            }
        }
    }
    found
}

#[test]
fn each_crate_depends_only_on_the_layers_beneath_it() {
    let root = workspace();
    for (krate, manifest, allowed) in [
        ("aggregates", "aggregates/Cargo.toml", &[][..]),
        ("columns", "columns/Cargo.toml", &[][..]),
        (
            "projections",
            "projections/Cargo.toml",
            &["aggregates", "columns"][..],
        ),
        ("store", "store/Cargo.toml", &["aggregates", "columns"][..]),
        (
            "app",
            "app/Cargo.toml",
            &["aggregates", "columns", "projections", "store"][..],
        ),
        (
            "api",
            "api/Cargo.toml",
            &["aggregates", "projections", "store", "app"][..],
        ),
        (
            "reservations",
            "Cargo.toml",
            &["aggregates", "projections", "store", "app", "api"][..],
        ),
    ] {
        let found = path_dependencies(&root.join(manifest));
        let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
        assert_eq!(found, allowed, "{krate} depends on {found:?}");
    }
}

/// Top-level module of a crate -> the top-level modules it names, with a file that
/// names each.
fn graph(src: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let root = workspace().join(src);
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
fn the_unit_of_work_names_nothing_but_its_error_type_and_the_privacy_layer() {
    let graph = graph("store/src");
    // The key store is written in the command's transaction and the writer seals with
    // it; the privacy layer itself names nothing that could name the unit of work.
    for (module, allowed) in [
        ("write", &["error", "privacy"][..]),
        ("privacy", &["error", "view"][..]),
        ("view", &[][..]),
        ("error", &[][..]),
        ("outbox", &[][..]),
        ("db", &[][..]),
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
fn commands_and_queries_do_not_know_each_other() {
    let graph = graph("app/src");
    for (module, forbidden) in [
        ("commands", &["queries", "payments"][..]),
        ("queries", &["commands", "payments"][..]),
        ("payments", &["queries"][..]),
        ("clock", &["commands", "queries", "payments"][..]),
    ] {
        let named = names(&graph, module);
        for other in forbidden {
            assert!(
                !named.contains(*other),
                "{module} names {other} (in {:?})",
                graph.get(module).and_then(|d| d.get(*other))
            );
        }
    }
}

#[test]
fn no_module_depends_on_itself_through_others_in_any_crate() {
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
    for (src, expected) in [
        (
            "aggregates/src",
            &["reservation", "room_night", "cancellation"][..],
        ),
        ("projections/src", &["runner", "log", "audit"][..]),
        ("store/src", &["write", "privacy", "view"][..]),
        ("app/src", &["commands", "queries", "payments"][..]),
        ("api/src", &["reservations", "error", "extract"][..]),
        ("src", &["startup", "workers"][..]),
    ] {
        let graph = graph(src);
        let mut done = BTreeSet::new();
        for module in graph.keys() {
            visit(module, &graph, &mut Vec::new(), &mut done);
        }
        // The check saw the modules it is about (a broken walk would pass vacuously).
        for module in expected {
            assert!(graph.contains_key(*module), "{module} not found in {src}");
        }
    }
}
