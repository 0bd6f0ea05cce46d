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
//! A case that loads can go on to what the app does at run time, in order, on one set of tables:
//!
//! ```text
//! --- loads
//! --- call spin             runs handler `spin` (the section may hold a JSON request:
//!                           {"params": {...}, "body": ...} or "body_text": "..." sent as it
//!                           is; by default an empty one)
//! --- answer                its answer, `STATUS JSON`, an error's as the server sends it
//! 500 {"error": "limit exceeded: operations", ...}
//! --- execution list        how handler `list` runs: `compiled`, or the reason it is not
//! ```
//!
//! Each call runs compiled and in Rhai's evaluator, which must answer the same.
//!
//! `UPDATE_GOLDEN=1 cargo test --test mistakes` writes what the load says (and the answers) into
//! the cases instead of comparing: read the diff before committing it.

use std::path::{Path, PathBuf};

use pure_lang::{App, Execution, Limits, Tables, World, WriteSet};

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
    /// After `--- loads`: what to run, each with what it must give.
    runs: Vec<(Run, String)>,
}

enum Run {
    /// A handler's name and its request as JSON.
    Call(String, String),
    /// A handler whose way of running is told.
    Execution(String),
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
        runs: Vec::new(),
    };
    let mut pending_edit: Option<(String, String)> = None;
    let mut pending_run: Option<Run> = None;
    let mut ended = false;
    for (header, body) in sections(&text) {
        let (name, argument) = header.split_once(' ').unwrap_or((&header, ""));
        assert!(
            pending_edit.is_none() || name == "to",
            "{path:?}: an edit without its `to`"
        );
        match name {
            "call" => pending_run = Some(Run::Call(argument.to_string(), body)),
            "answer" => {
                let run = pending_run.take().expect("`answer` follows a `call`");
                case.runs.push((run, body.trim().to_string()));
            }
            "execution" => case.runs.push((
                Run::Execution(argument.to_string()),
                body.trim().to_string(),
            )),
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

/// Makes the case's app and loads it: the load's message, or `None` when it loads; then what
/// each of its runs gives.
fn outcome(case: &Case) -> (Option<String>, Vec<String>) {
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
    let app = match App::load_with(dir.path(), Limits::default()) {
        Ok(app) => app,
        Err(error) => return (Some(error.to_string().replace(&prefix, "")), Vec::new()),
    };
    (None, runs(app, &case.runs))
}

/// What each run gives, the calls made on one set of tables, compiled and in Rhai alike.
fn runs(mut app: App, runs: &[(Run, String)]) -> Vec<String> {
    let engines: Vec<Vec<String>> = [false, true]
        .into_iter()
        .map(|interpreted| {
            app.set_interpreted(interpreted);
            // A fixed time and seed, as `pure-serve test` gives: the same answers every run.
            app.set_world(World::fixed(Some(1_767_225_600_000), Some(1)));
            let mut tables = Tables::new(app.schema().tables.len());
            tables
                .set_indexes(app.indexes().to_vec())
                .expect("the indexes");
            runs.iter()
                .map(|(run, _)| match run {
                    Run::Execution(handler) => match app.execution(handler) {
                        Some(Execution::Compiled) => "compiled".to_string(),
                        Some(Execution::Interpreted { reason }) => reason,
                        None => "no such handler".to_string(),
                    },
                    Run::Call(handler, request) => call(&app, &mut tables, handler, request),
                })
                .collect()
        })
        .collect();
    // How a handler runs is the app's, not an engine's: only the calls must agree.
    for (at, (run, _)) in runs.iter().enumerate() {
        if let Run::Call(handler, _) = run {
            assert_eq!(
                engines[0][at], engines[1][at],
                "{handler}: compiled and in Rhai"
            );
        }
    }
    engines.into_iter().next().expect("two engines")
}

fn call(app: &App, tables: &mut Tables, handler: &str, request: &str) -> String {
    let given: serde_json::Value = match request.trim() {
        "" => serde_json::json!({}),
        text => serde_json::from_str(text).expect("a request is JSON"),
    };
    let text = |value: &serde_json::Value| match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let params = given["params"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, value)| (name.clone(), text(value)))
        .collect::<Vec<_>>();
    let route = app
        .routes()
        .iter()
        .position(|r| r.handler == handler)
        .expect("a route of the handler");
    // `body_text`: the body as sent, for what JSON values cannot hold (an integer past 64 bits).
    let body = match (&given["body"], &given["body_text"]) {
        (_, serde_json::Value::String(raw)) => raw.clone(),
        (serde_json::Value::Null, _) => String::new(),
        (body, _) => body.to_string(),
    };
    let request = match app.request(
        route,
        params,
        Vec::new(),
        Default::default(),
        body.as_bytes(),
    ) {
        Ok(request) => request,
        Err(error) => return format!("refused before the handler: {error}"),
    };
    let mut writes = WriteSet::default();
    match app.run_write(handler, &request, tables, &mut writes) {
        Ok(answer) => format!("{} {}", answer.status, answer.body),
        Err(error) => format!("{} {}", error.status(), error.to_json()),
    }
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
        let (actual, given) = outcome(&case);
        let expected_runs: Vec<String> = case.runs.iter().map(|(_, e)| e.clone()).collect();
        if actual == case.expected && given == expected_runs {
            continue;
        }
        if update {
            let text = std::fs::read_to_string(path).expect("reads the case");
            let kept = text
                .find("\n--- error")
                .or_else(|| text.find("\n--- loads"))
                .expect("a case ends with its outcome");
            let mut ending = match &actual {
                Some(message) => format!("\n--- error\n{message}\n"),
                None => "\n--- loads\n".to_string(),
            };
            for ((run, _), answer) in case.runs.iter().zip(&given) {
                match run {
                    Run::Call(handler, request) => {
                        ending.push_str(&format!("--- call {handler}\n"));
                        if !request.trim().is_empty() {
                            ending.push_str(&format!("{}\n", request.trim()));
                        }
                        ending.push_str(&format!("--- answer\n{answer}\n"));
                    }
                    Run::Execution(handler) => {
                        ending.push_str(&format!("--- execution {handler}\n{answer}\n"))
                    }
                }
            }
            std::fs::write(path, format!("{}{ending}", &text[..kept])).expect("rewrites");
        } else {
            differed.push(format!(
                "{}\n  expected: {:?} {:?}\n  actual:   {:?} {:?}",
                path.file_name().unwrap_or_default().to_string_lossy(),
                case.expected,
                expected_runs,
                actual,
                given
            ));
        }
    }
    assert!(differed.is_empty(), "\n{}", differed.join("\n"));
}
