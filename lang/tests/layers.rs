//! The rule of lang's four layers, read from its source (in the manner of rust-analyzer's
//! `tidy` tests): each module sits in one of `state`, `script`, `rhai_ast` and `app`, imports
//! only from the layers its own may, opens with a `//!` doc, and no two modules import each
//! other through a circle. Rhai's internal AST is named in `rhai_ast` alone.
//!
//! The rule, from the bottom: `state` imports nothing else of lang; `script` imports `state`;
//! `rhai_ast` imports `script` and `state`; `app` imports everything. A name that `lib.rs`
//! re-exports (`crate::Limits`) counts as the layer of the module it comes from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const LAYERS: [&str; 4] = ["state", "script", "rhai_ast", "app"];

/// The layers each may import from.
fn allowed(layer: &str) -> &'static [&'static str] {
    match layer {
        "state" => &[],
        "script" => &["state"],
        "rhai_ast" => &["script", "state"],
        "app" => &["state", "script", "rhai_ast"],
        _ => unreachable!("not a layer: {layer}"),
    }
}

/// Types and methods of Rhai's `internals` feature: its AST, which has no semver promise.
const AST_NAMES: [&str; 12] = [
    "ASTNode",
    "Stmt",
    "Expr",
    "FnCallExpr",
    "ScriptFnDef",
    "StmtBlock",
    "BinaryExpr",
    "OpAssignment",
    "FlowControl",
    "CustomExpr",
    ".iter_fn_def(",
    ".statements(",
];

/// One source file: its path under `src/` (`script/api.rs`) and its text.
struct Source {
    path: String,
    text: String,
}

impl Source {
    /// `script/api.rs` → ("script", "api"); `rhai_ast/compiled/ops.rs` → ("rhai_ast",
    /// "compiled"): a folder inside a layer is one module of it.
    fn module(&self) -> Option<(&str, &str)> {
        let path = self.path.strip_suffix(".rs")?;
        let mut parts = path.split('/');
        let layer = parts.next()?;
        let module = parts.next()?;
        Some((layer, module))
    }

    /// The text without comments and without its tests, which may reach anywhere.
    fn code(&self) -> String {
        let text = self.text.split("#[cfg(test)]").next().unwrap_or("");
        text.lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn sources(src: &Path) -> Vec<Source> {
    let mut found = Vec::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("lang/src is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(src).expect("under src");
                found.push(Source {
                    path: relative.to_string_lossy().replace('\\', "/"),
                    text: std::fs::read_to_string(&path).expect("a readable source file"),
                });
            }
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// The names `lib.rs` re-exports, each with the (layer, module) it comes from.
fn reexports(lib: &str) -> BTreeMap<String, (String, String)> {
    let mut names = BTreeMap::new();
    for statement in lib.split(';') {
        let Some(rest) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let mut path = rest.split("::");
        let (Some(layer), Some(module)) = (path.next(), path.next()) else {
            continue;
        };
        if !LAYERS.contains(&layer) {
            continue;
        }
        let tail = rest.rsplit("::").next().unwrap_or("");
        for name in tail.trim_matches(|c| c == '{' || c == '}').split(',') {
            let name = name.trim();
            if !name.is_empty() {
                names.insert(name.to_string(), (layer.to_string(), module.to_string()));
            }
        }
    }
    names
}

/// Every `crate::` path in `code`, as the (layer, module) it reaches.
fn imports(code: &str, lib: &BTreeMap<String, (String, String)>) -> BTreeSet<(String, String)> {
    let mut reached = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue; // `pure_crate::`, not this crate
        }
        let rest = &code[at + "crate::".len()..];
        let word = |s: &str| -> String {
            s.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        };
        let first = word(rest);
        if LAYERS.contains(&first.as_str()) {
            let module = rest[first.len()..]
                .strip_prefix("::")
                .map(word)
                .unwrap_or_default();
            reached.insert((first, module));
        } else if let Some((layer, module)) = lib.get(&first) {
            reached.insert((layer.clone(), module.clone()));
        } else if rest.starts_with('{') {
            reached.insert(("{".into(), "a grouped `use crate::{...}`".into()));
        } else {
            reached.insert(("?".into(), first));
        }
    }
    reached
}

/// What is wrong with these sources against the rule: one line per fault.
fn faults(sources: &[Source]) -> Vec<String> {
    let lib = sources
        .iter()
        .find(|s| s.path == "lib.rs")
        .map(|s| reexports(&s.text))
        .unwrap_or_default();
    let mut faults = Vec::new();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for source in sources {
        if !source.text.trim_start().starts_with("//!") {
            faults.push(format!("{}: does not open with a //! doc", source.path));
        }
        if source.path == "lib.rs" {
            continue;
        }
        let Some((layer, module)) = source.module().filter(|(l, _)| LAYERS.contains(l)) else {
            faults.push(format!(
                "{}: not inside one of the layers {LAYERS:?}",
                source.path
            ));
            continue;
        };
        let code = source.code();
        let node = format!("{layer}::{module}");
        for (to_layer, to_module) in imports(&code, &lib) {
            let target = format!("{to_layer}::{to_module}");
            if to_layer == layer {
                if to_module != module && to_module != "mod" && !to_module.is_empty() {
                    graph.entry(node.clone()).or_default().insert(target);
                }
            } else if !allowed(layer).contains(&to_layer.as_str()) {
                faults.push(format!(
                    "{}: imports crate::{target}, but {layer} may import only {:?}",
                    source.path,
                    allowed(layer)
                ));
            }
        }
        if layer != "rhai_ast" {
            for name in AST_NAMES {
                let named = if name.starts_with('.') {
                    code.contains(name)
                } else {
                    code.match_indices(name).any(|(at, _)| {
                        let before = code[..at].chars().next_back();
                        let after = code[at + name.len()..].chars().next();
                        let word =
                            |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                        !word(before) && !word(after)
                    })
                };
                if named {
                    faults.push(format!(
                        "{}: names Rhai's internal AST ({name}), which only rhai_ast may read",
                        source.path
                    ));
                }
            }
        }
    }
    for circle in circles(&graph) {
        faults.push(format!("an import circle: {}", circle.join(" -> ")));
    }
    faults
}

/// The import circles of `graph` (each as a path that returns to its start).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut Vec<Vec<String>>,
    ) {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_string());
            found.push(circle);
            return;
        }
        if !done.insert(node.to_string()) {
            return;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            visit(next, graph, path, done, found);
        }
        path.pop();
    }
    let mut found = Vec::new();
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, graph, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

#[test]
fn every_module_keeps_the_layer_rule() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sources = sources(&src);
    assert!(
        sources.len() > 20,
        "lang/src was read: {} files",
        sources.len()
    );
    let faults = faults(&sources);
    assert!(
        faults.is_empty(),
        "the layer rule is broken:\n{}",
        faults.join("\n")
    );
}

fn source(path: &str, text: &str) -> Source {
    Source {
        path: path.into(),
        text: text.into(),
    }
}

/// The check itself catches each kind of fault (a check that cannot fail holds nothing).
#[test]
fn the_rule_catches_each_kind_of_fault() {
    let lib = source(
        "lib.rs",
        "//! lib\nmod state;\npub use script::limits::{Limits, LIMIT_CAPS};\n",
    );
    let clean = [
        lib,
        source("state/tables.rs", "//! t\nuse crate::state::key::Key;\n"),
        source("state/key.rs", "//! k\n"),
        source(
            "script/api.rs",
            "//! a\nuse crate::state::tables::Tables;\n",
        ),
        source("script/limits.rs", "//! l\n"),
        source(
            "app/mod.rs",
            "//! m\nuse crate::rhai_ast::compiled::Program;\n",
        ),
    ];
    assert_eq!(faults(&clean), Vec::<String>::new());

    let with = |extra: Source| {
        let mut all: Vec<Source> = clean.iter().map(|s| source(&s.path, &s.text)).collect();
        all.push(extra);
        faults(&all)
    };
    let up = with(source(
        "state/codec.rs",
        "//! c\nuse crate::script::api::Row;\n",
    ));
    assert!(
        up[0].contains("state/codec.rs: imports crate::script::api"),
        "{up:?}"
    );
    let reexported = with(source(
        "state/codec.rs",
        "//! c\nfn f(_: crate::Limits) {}\n",
    ));
    assert!(
        reexported[0].contains("imports crate::script::limits"),
        "{reexported:?}"
    );
    let undocumented = with(source("script/world.rs", "use crate::state::key::Key;\n"));
    assert!(
        undocumented[0].contains("does not open with a //! doc"),
        "{undocumented:?}"
    );
    let outside = with(source("loose.rs", "//! l\n"));
    assert!(
        outside[0].contains("not inside one of the layers"),
        "{outside:?}"
    );
    let ast = with(source(
        "script/value.rs",
        "//! v\nuse rhai::{Dynamic, Stmt};\n",
    ));
    assert!(ast[0].contains("internal AST (Stmt)"), "{ast:?}");
    let circle = with(source(
        "state/key.rs",
        "//! k\nuse crate::state::tables::Tables;\n",
    ));
    assert!(
        circle
            .iter()
            .any(|f| f.contains("circle") && f.contains("state::key")),
        "{circle:?}"
    );
    let in_a_test = with(source(
        "state/schema.rs",
        "//! s\n#[cfg(test)]\nmod tests { use crate::script::api::Row; }\n",
    ));
    assert_eq!(in_a_test, Vec::<String>::new(), "tests may reach anywhere");
}
