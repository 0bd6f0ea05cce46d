//! The runtime's modules import one another in one direction: no two of them import each other,
//! directly or through others (the write path reads inbox → owner → building → syncer →
//! publish, and `runtime` wires it). Every module opens with a `//!` doc. A tidy test, in the
//! manner of rust-analyzer's: it reads the sources, so a new import that closes a circle fails
//! here, naming the circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each module of `src/` (a folder counts as one module, named by the folder) with the modules
/// it names through `crate::`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in sources(&src) {
        let module = module_of(&src, &path);
        let text = std::fs::read_to_string(&path).expect("a source file reads");
        let named = graph.entry(module.clone()).or_default();
        for (at, _) in text.match_indices("crate::") {
            let rest = &text[at + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let target = &rest[..end];
            assert!(
                target.starts_with(|c: char| c.is_lowercase()),
                "{}: `crate::{target}` goes through lib.rs's re-exports; name the module",
                path.display()
            );
            if target != module {
                named.insert(target.to_string());
            }
        }
    }
    graph
}

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("src/ lists") {
        let path = entry.expect("an entry of src/").path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
    found.sort();
    found
}

fn module_of(src: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(src).expect("under src/");
    let first = relative.components().next().expect("a file name");
    let name = first.as_os_str().to_str().expect("a UTF-8 name");
    name.trim_end_matches(".rs").to_string()
}

/// A circle of imports, if there is one, as the modules along it.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        module: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut circle = path[at..].to_vec();
            circle.push(module.to_string());
            return Some(circle);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_string());
        for next in graph.get(module).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|module| visit(module, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_runtime_modules_import_one_another_in_one_direction() {
    let graph = imports();
    assert!(graph.contains_key("owner") && graph.contains_key("syncer"));
    if let Some(circle) = circle(&graph) {
        panic!(
            "the runtime's modules import in a circle: {}",
            circle.join(" → ")
        );
    }
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a")]
        .into_iter()
        .map(|(from, to)| (from.to_string(), BTreeSet::from([to.to_string()])))
        .collect();
    assert_eq!(circle(&graph).map(|c| c.len()), Some(4));
}

#[test]
fn every_runtime_module_opens_with_its_doc() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for path in sources(&src) {
        let text = std::fs::read_to_string(&path).expect("a source file reads");
        assert!(
            text.starts_with("//!"),
            "{} does not open with a `//!` doc",
            path.display()
        );
    }
}
