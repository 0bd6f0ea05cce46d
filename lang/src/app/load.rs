//! Loading an app: its manifest and scripts, read, compiled and checked.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use rhai::{Position, Scope};
use serde_json::Value;

use super::manifest::{
    check_manifest_keys, manifest_position, parse_indexes, parse_routes, parse_tables,
};
use super::{App, Handler};
use crate::app::cors::Cors;
use crate::rhai_ast::checks::{
    builtin_names, check_calls, explain_compile_error, is_script_word, request_fields,
};
use crate::rhai_ast::compiled::Program;
use crate::rhai_ast::syntax;
use crate::script::engine;
use crate::script::error::{LoadError, SourceMap};
use crate::script::limits::Limits;
use crate::script::world::World;
use crate::state::schema::TableId;

impl App {
    /// Reads `app.json`, compiles every `.rhai` file of `dir`, and checks that every route names
    /// a function defined with one parameter.
    pub fn load(dir: &Path) -> Result<App, LoadError> {
        Self::load_with(dir, Limits::default())
    }

    pub fn load_with(dir: &Path, limits: Limits) -> Result<App, LoadError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LoadError::Io { path, source }
        };
        let manifest_path = dir.join("app.json");
        let manifest = std::fs::read_to_string(&manifest_path).map_err(io(&manifest_path))?;
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let path = entry.map_err(io(dir))?.path();
            if path.extension().is_some_and(|e| e == "rhai") {
                let text = std::fs::read_to_string(&path).map_err(io(&path))?;
                let name = path.file_name().expect("a read_dir entry has a name");
                files.push((name.to_string_lossy().into_owned(), text));
            }
        }
        Self::from_sources(&manifest, files, limits).map_err(|e| match e {
            LoadError::Manifest { message, at, .. } => LoadError::Manifest {
                path: manifest_path,
                at,
                message,
            },
            other => other,
        })
    }

    /// The same from text in memory: the manifest and `(file name, script)` pairs.
    pub fn from_sources(
        manifest: &str,
        mut files: Vec<(String, String)>,
        limits: Limits,
    ) -> Result<App, LoadError> {
        let text = manifest;
        let bad = |message: String| LoadError::Manifest {
            path: "app.json".into(),
            at: manifest_position(text, &message),
            message,
        };
        let manifest: Value = serde_json::from_str(manifest).map_err(|e| LoadError::Manifest {
            path: "app.json".into(),
            at: (e.line() > 0).then(|| (e.line(), e.column())),
            message: e.to_string(),
        })?;
        check_manifest_keys(&manifest).map_err(bad)?;
        let limits = limits.with_manifest(&manifest["limits"]).map_err(bad)?;
        let name = manifest["name"]
            .as_str()
            .ok_or_else(|| bad("no \"name\" string".into()))?;
        let routes = parse_routes(&manifest["routes"]).map_err(bad)?;
        let methods: Vec<String> = routes.iter().map(|r| r.method.clone()).collect();
        let cors = Cors::parse(&manifest["cors"], &methods).map_err(bad)?;
        let schema = Arc::new(parse_tables(&manifest["tables"]).map_err(bad)?);
        schema.check().map_err(bad)?;
        for table in &schema.tables {
            if is_script_word(&table.name) {
                return Err(bad(format!(
                    "a table cannot be named {:?}: scripts could not name it (it is a word of \
                     the script language, or the name handlers give their request)",
                    table.name
                )));
            }
        }

        // One text, so that functions of one file can call those of another; the source map
        // turns positions back into files.
        files.sort();
        let mut text = String::new();
        let mut sources = SourceMap::default();
        let mut line = 1;
        for (file, script) in &files {
            sources.push(file.clone(), line);
            text.push_str(script);
            text.push('\n');
            // The file plus the newline after it spans one line per '\n' in the file, plus one.
            line += script.split('\n').count();
        }
        let indexes = parse_indexes(&manifest["indexes"], &schema).map_err(bad)?;
        let engine = engine::build(&schema, &indexes, &limits);
        let mut declared = Scope::new();
        for (id, table) in schema.tables.iter().enumerate() {
            declared.push_constant(
                table.name.as_str(),
                crate::script::api::Table { id: id as TableId },
            );
        }
        // Strict variables (engine::build): a name that is neither a table, a parameter nor a
        // local is an error here, not a 500 on every call.
        let located = |position: Position, message: String| {
            let (file, line, column) = sources.locate(position);
            LoadError::Compile {
                file,
                line,
                column,
                message,
            }
        };
        let ast = engine.compile_with_scope(&declared, &text).map_err(|e| {
            // An unbalanced brace confuses the parser from there on (into the next file, too):
            // what Rhai says is about a later token, often far from the brace.
            for (file, script) in &files {
                if let Some((line, column, message)) = syntax::unbalanced_brace(file, script) {
                    return LoadError::Compile {
                        file: file.clone(),
                        line,
                        column,
                        message,
                    };
                }
            }
            match &*e.0 {
                rhai::ParseErrorType::MissingToken(token, _) if token == ";" => located(
                    syntax::missing_semicolon(&text, e.1),
                    "missing ; at the end of this statement".into(),
                ),
                _ if syntax::word_at(&text, e.1) == Some("curry") => located(
                    e.1,
                    "curry is not available: a function pointer's curried values are outside \
                     what the server can bound (pass the values as arguments instead)"
                        .into(),
                ),
                error => located(e.1, explain_compile_error(error, &text, &schema)),
            }
        })?;
        let builtin = builtin_names(&engine);
        check_calls(&ast, &builtin).map_err(|(position, message)| located(position, message))?;
        crate::rhai_ast::table_calls::check(&ast, &schema, &indexes, &builtin)
            .map_err(|(position, message)| located(position, message))?;
        let handlers: HashMap<String, Handler> = ast
            .iter_functions()
            .filter(|f| f.params.len() == 1)
            .map(|f| {
                let handler = Handler {
                    definition: definition_position(&text, f.name),
                    fields: request_fields(&ast, f.name),
                };
                (f.name.to_string(), handler)
            })
            .collect();
        for route in &routes {
            if handlers.contains_key(&route.handler) {
                continue;
            }
            let handler = &route.handler;
            let route = format!("{} {}", route.method, route.path);
            let defined = ast.iter_functions().find(|f| f.name == handler.as_str());
            return Err(match defined {
                // Where the function is: that is what to change, more often than the route.
                Some(function) => located(
                    definition_position(&text, handler),
                    format!(
                        "fn {handler} is defined with {} parameters, but route {route:?} calls \
                         it as a handler, which takes one (request)",
                        function.params.len()
                    ),
                ),
                None => bad(format!(
                    "route {route:?} names handler {handler:?}, but no script defines fn \
                     {handler}(request)"
                )),
            });
        }
        let name = name.to_string();
        let handler_names: Vec<String> = handlers.keys().cloned().collect();
        let program = Program::compile(&ast, &schema, &indexes, &handler_names, &sources);
        Ok(App {
            name,
            routes,
            schema,
            engine,
            tracing: OnceLock::new(),
            ast,
            sources,
            handlers,
            limits,
            program,
            use_compiled: true,
            fallbacks: AtomicU64::new(0),
            world: World::live(),
            log: None,
            cors,
            indexes,
        })
    }
}

/// Where `fn name` is defined in `text` (the first match), for errors that have no position.
fn definition_position(text: &str, name: &str) -> Position {
    for (index, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("fn ") {
            let after = rest[at + 3..].trim_start();
            if after.starts_with(name) && after[name.len()..].trim_start().starts_with('(') {
                let column = line.len() - rest.len() + at + 1;
                return Position::new(index as u16 + 1, column as u16);
            }
            rest = &rest[at + 3..];
        }
    }
    Position::NONE
}
