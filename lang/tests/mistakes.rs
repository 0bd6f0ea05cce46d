//! Golden files of the messages an app author gets for a mistake (`tests/mistakes/*.case`).
//!
//! Each case starts from the todo app in `tests/mistakes/todo/` (the app of research note 014,
//! written from the guide alone), makes one mistake in it, loads it, and compares what the load
//! says with the case's `--- error` section, word for word. A case is a list of sections:
//!
//! ```text
//! # What the mistake is (comment lines, before the first section).
//! --- edit todo.rhai        the first occurrence of this text in the file ...
//!     let id = next_id();
//! --- to                    ... is replaced by this one
//!     let id = next_id()
//! --- file extra.rhai       a whole file, added or replaced
//! --- base none             start from an empty directory instead of the todo app
//! --- error                 what loading says (`--- loads` instead: it must load)
//! todo.rhai:13:23: missing ; at the end of this statement
//! ```
//!
//! `UPDATE_GOLDEN=1 cargo test --test mistakes` writes what the load says into the cases
//! instead of comparing: read the diff before committing it.

use std::path::{Path, PathBuf};

use pure_lang::{App, Limits};

enum Section {
    Edit {
        file: String,
        from: String,
        to: String,
    },
    File {
        name: String,
        text: String,
    },
}

struct Case {
    base: bool,
    sections: Vec<Section>,
    /// `None`: the case says `--- loads`.
    expected: Option<String>,
}

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mistakes")
}

/// The sections of a case file: each header line `--- name [argument]` and the lines up to the
/// next one.
fn sections(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        if let Some(header) = line.strip_prefix("--- ") {
            out.push((header.trim().to_string(), Vec::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push(line);
        } else {
            assert!(
                line.is_empty() || line.starts_with('#'),
                "a line before the first section is a comment: {line:?}"
            );
        }
    }
    out.into_iter()
        .map(|(header, body)| (header, body.join("\n")))
        .collect()
}

fn parse(path: &Path) -> Case {
    let text = std::fs::read_to_string(path).expect("reads the case");
    let mut case = Case {
        base: true,
        sections: Vec::new(),
        expected: None,
    };
    let mut pending_edit: Option<(String, String)> = None;
    let mut ended = false;
    for (header, body) in sections(&text) {
        let (name, argument) = header.split_once(' ').unwrap_or((&header, ""));
        assert!(
            pending_edit.is_none() || name == "to",
            "{path:?}: an edit without its `to`"
        );
        match name {
            "base" => case.base = argument != "none",
            "edit" => pending_edit = Some((argument.to_string(), body)),
            "to" => {
                let (file, from) = pending_edit.take().expect("`to` follows an `edit`");
                case.sections.push(Section::Edit {
                    file,
                    from,
                    to: body,
                });
            }
            "file" => case.sections.push(Section::File {
                name: argument.to_string(),
                text: body + "\n",
            }),
            "error" => {
                case.expected = Some(body.trim().to_string());
                ended = true;
            }
            "loads" => ended = true,
            other => panic!("{path:?}: unknown section {other:?}"),
        }
    }
    assert!(
        ended,
        "{path:?}: a case ends with `--- error` or `--- loads`"
    );
    case
}

/// Makes the case's app and loads it: the load's message, or `None` when it loads.
fn outcome(case: &Case) -> Option<String> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    if case.base {
        for entry in std::fs::read_dir(cases_dir().join("todo")).expect("the todo app") {
            let entry = entry.expect("an entry");
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).expect("copies");
        }
    }
    for section in &case.sections {
        match section {
            Section::Edit { file, from, to } => {
                let path = dir.path().join(file);
                let text = std::fs::read_to_string(&path).expect("the edited file");
                assert!(text.contains(from.as_str()), "{file} holds no {from:?}");
                std::fs::write(&path, text.replacen(from.as_str(), to, 1)).expect("writes");
            }
            Section::File { name, text } => {
                std::fs::write(dir.path().join(name), text).expect("writes the file")
            }
        }
    }
    // A message names the app's files by their place in it, as the author sees them.
    let prefix = format!("{}/", dir.path().display());
    App::load_with(dir.path(), Limits::default())
        .err()
        .map(|e| e.to_string().replace(&prefix, ""))
}

#[test]
fn every_mistake_gets_its_message() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(cases_dir())
        .expect("tests/mistakes")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "case"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 20, "the cases are missing: {paths:?}");
    let mut differed = Vec::new();
    for path in &paths {
        let case = parse(path);
        let actual = outcome(&case);
        if actual == case.expected {
            continue;
        }
        if update {
            let text = std::fs::read_to_string(path).expect("reads the case");
            let kept = text
                .rfind("\n--- error")
                .or_else(|| text.rfind("\n--- loads"))
                .expect("a case ends with its outcome");
            let ending = match &actual {
                Some(message) => format!("\n--- error\n{message}\n"),
                None => "\n--- loads\n".to_string(),
            };
            std::fs::write(path, format!("{}{ending}", &text[..kept])).expect("rewrites");
        } else {
            differed.push(format!(
                "{}\n  expected: {:?}\n  actual:   {:?}",
                path.file_name().unwrap_or_default().to_string_lossy(),
                case.expected,
                actual
            ));
        }
    }
    assert!(differed.is_empty(), "\n{}", differed.join("\n"));
}
