//! Loading an app: its manifest and scripts, read, compiled and checked.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use rhai::{Engine, Position, Scope, AST};
use serde_json::Value;

use super::manifest::{
    check_manifest_keys, manifest_position, parse_indexes, parse_routes, parse_schedules,
    parse_tables,
};
use super::{App, Handler, Route};
use crate::app::cors::Cors;
use crate::rhai_ast::checks::{
    builtin_names, check_answers, check_calls, check_env, explain_compile_error, is_script_word,
    request_fields,
};
use crate::rhai_ast::compiled::Program;
use crate::rhai_ast::syntax;
use crate::script::engine;
use crate::script::error::{LoadError, SourceMap};
use crate::script::limits::Limits;
use crate::script::settings::{Environment, Settings};
use crate::script::world::World;
use crate::state::schema::{
    is_hidden, Schema, TableId, TableSchema, DUE_INDEX, IDS_TABLE, SCHEDULE_DUE, SCHEDULE_TABLE,
};
use crate::state::tables::IndexDef;

impl App {
    /// Reads `app.json`, compiles every `.rhai` file of `dir`, and checks that every route names
    /// a function defined with one parameter.
    pub fn load(dir: &Path) -> Result<App, LoadError> {
        Self::load_with(dir, Limits::default())
    }

    pub fn load_with(dir: &Path, limits: Limits) -> Result<App, LoadError> {
        Self::load_in(dir, limits, &Environment::process())
    }

    /// Loaded with the values of its declared settings and secrets taken from `environment`.
    pub fn load_in(
        dir: &Path,
        limits: Limits,
        environment: &Environment,
    ) -> Result<App, LoadError> {
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
        Self::from_sources_in(&manifest, files, limits, environment).map_err(|e| match e {
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
        files: Vec<(String, String)>,
        limits: Limits,
    ) -> Result<App, LoadError> {
        Self::from_sources_in(manifest, files, limits, &Environment::process())
    }

    /// [`App::from_sources`] with settings and secrets from `environment`.
    pub fn from_sources_in(
        manifest: &str,
        files: Vec<(String, String)>,
        limits: Limits,
        environment: &Environment,
    ) -> Result<App, LoadError> {
        let Manifest {
            name,
            limits,
            routes,
            cors,
            schema,
            indexes,
            settings,
            guard,
            schedules,
        } = Manifest::parse(manifest, limits, environment)?;
        let scripts = Scripts::join(files);
        let engine = engine::build(&schema, &indexes, &limits);
        let ast = scripts.compile(&engine, &schema)?;
        let located = |(position, message)| scripts.located(position, message);
        let builtin = builtin_names(&engine);
        check_calls(&ast, &builtin).map_err(located)?;
        crate::rhai_ast::table_calls::check(&ast, &schema, &indexes, &builtin).map_err(located)?;
        crate::rhai_ast::table_calls::check_row_fields(&ast, &schema).map_err(located)?;
        // Handlers and guards: what each answers is what a client gets, or what decides.
        let routed: Vec<&str> = routes
            .iter()
            .flat_map(|r| std::iter::once(r.handler.as_str()).chain(r.guard.as_deref()))
            .collect();
        check_answers(&ast, &routed).map_err(located)?;
        check_env(&ast, &settings).map_err(located)?;
        if let Some(guard) = guard.filter(|g| !ast.iter_functions().any(|f| f.name == g.as_str())) {
            return Err(manifest_error(
                manifest,
                format!(
                    "\"guard\": {guard:?} names no function: no script defines fn {guard}(request)"
                ),
            ));
        }
        let handlers = scripts.handlers(&ast, &routes, manifest)?;
        let handler_names: Vec<String> = handlers.keys().cloned().collect();
        crate::rhai_ast::checks::check_schedules(&ast, &handler_names).map_err(located)?;
        if let Some(schedule) = schedules
            .iter()
            .find(|s| !handlers.contains_key(&s.handler))
        {
            return Err(manifest_error(
                manifest,
                format!(
                    "schedule {:?} runs {:?}, but no script defines fn {}(request)",
                    schedule.name, schedule.handler, schedule.handler
                ),
            ));
        }
        let program = Program::compile(&ast, &schema, &indexes, &handler_names, &scripts.sources);
        Ok(App {
            name,
            routes,
            schema,
            engine,
            tracing: OnceLock::new(),
            ast,
            sources: scripts.sources,
            handler_names: handler_names.iter().cloned().collect(),
            schedules,
            handlers,
            limits,
            program,
            use_compiled: true,
            fallbacks: AtomicU64::new(0),
            world: World::live(),
            log: None,
            cors,
            indexes,
            settings,
        })
    }
}

/// The internal index of the schedule table by due time: entries `[due, id]`, the next due first.
fn due_index(schema: &Schema) -> IndexDef {
    IndexDef {
        name: DUE_INDEX.to_string(),
        table: schema
            .table_id(SCHEDULE_TABLE)
            .expect("every app has the schedule table"),
        sources: vec![crate::state::tables::IndexSource::Field(SCHEDULE_DUE)],
        fields: vec!["due".to_string()],
        descending: vec![false],
        unique: false,
    }
}

/// What `app.json` declares, checked.
struct Manifest {
    name: String,
    limits: Limits,
    routes: Vec<Route>,
    cors: Option<Cors>,
    schema: Arc<Schema>,
    indexes: Vec<IndexDef>,
    settings: Settings,
    /// The app's own `"guard"`, which its routes take unless they name theirs.
    guard: Option<String>,
    schedules: Vec<crate::app::due::NamedSchedule>,
}

impl Manifest {
    /// `text` parsed and checked; `limits` with the manifest's own applied.
    fn parse(text: &str, limits: Limits, environment: &Environment) -> Result<Manifest, LoadError> {
        let bad = |message: String| manifest_error(text, message);
        let manifest: Value = serde_json::from_str(text).map_err(|e| LoadError::Manifest {
            path: "app.json".into(),
            at: (e.line() > 0).then(|| (e.line(), e.column())),
            message: e.to_string(),
        })?;
        check_manifest_keys(&manifest).map_err(bad)?;
        let limits = limits.with_manifest(&manifest["limits"]).map_err(bad)?;
        let name = manifest["name"]
            .as_str()
            .ok_or_else(|| bad("no \"name\" string".into()))?;
        let guard = match &manifest["guard"] {
            Value::Null => None,
            Value::String(guard) => Some(guard.as_str()),
            _ => return Err(bad("\"guard\" must be the name of a function".into())),
        };
        let routes = parse_routes(&manifest["routes"], guard).map_err(bad)?;
        let guard = guard.map(str::to_string);
        let methods: Vec<String> = routes.iter().map(|r| r.method.clone()).collect();
        let cors = Cors::parse(&manifest["cors"], &methods).map_err(bad)?;
        let mut schema = parse_tables(&manifest["tables"], text).map_err(bad)?;
        schema.check().map_err(bad)?;
        if let Some(table) = schema.tables.iter().find(|t| is_script_word(&t.name)) {
            return Err(bad(format!(
                "a table cannot be named {:?}: scripts could not name it (it is a word of the \
                 script language, or the name handlers give their request)",
                table.name
            )));
        }
        if schema.table_id(IDS_TABLE).is_some() {
            return Err(bad(format!(
                "a table cannot be named {IDS_TABLE:?}: it is where next_id() keeps its counters"
            )));
        }
        if schema.table_id(SCHEDULE_TABLE).is_some() {
            return Err(bad(format!(
                "a table cannot be named {SCHEDULE_TABLE:?}: it is where schedule() keeps its \
                 entries"
            )));
        }
        schema.tables.push(TableSchema::ids());
        schema.tables.push(TableSchema::schedule());
        let schema = Arc::new(schema);
        let mut indexes = parse_indexes(&manifest["indexes"], &schema).map_err(bad)?;
        indexes.push(due_index(&schema));
        let settings = Settings::resolve(&manifest, environment).map_err(bad)?;
        let schedules = parse_schedules(&manifest["schedules"]).map_err(bad)?;
        Ok(Manifest {
            name: name.to_string(),
            limits,
            routes,
            cors,
            schema,
            indexes,
            settings,
            guard,
            schedules,
        })
    }
}

/// A mistake in the manifest, placed in its text where the message's names are.
fn manifest_error(text: &str, message: String) -> LoadError {
    LoadError::Manifest {
        path: "app.json".into(),
        at: manifest_position(text, &message),
        message,
    }
}

/// An app's scripts as one text, so that functions of one file can call those of another; the
/// source map turns positions back into files.
struct Scripts {
    files: Vec<(String, String)>,
    text: String,
    sources: SourceMap,
}

impl Scripts {
    /// The files in name order, one after the other.
    fn join(mut files: Vec<(String, String)>) -> Scripts {
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
        Scripts {
            files,
            text,
            sources,
        }
    }

    /// A compile error at `position` of the joined text, named by file, line and column.
    fn located(&self, position: Position, message: String) -> LoadError {
        let (file, line, column) = self.sources.locate(position);
        LoadError::Compile {
            file,
            line,
            column,
            message,
        }
    }

    /// Compiled with the tables as constants. Strict variables (`engine::build`): a name that
    /// is neither a table, a parameter nor a local is an error here, not a 500 on every call.
    fn compile(&self, engine: &Engine, schema: &Schema) -> Result<AST, LoadError> {
        let mut declared = Scope::new();
        for (id, table) in schema.tables.iter().enumerate() {
            if is_hidden(&table.name) {
                continue;
            }
            declared.push_constant(
                table.name.as_str(),
                crate::script::api::Table { id: id as TableId },
            );
        }
        engine
            .compile_with_scope(&declared, &self.text)
            .map_err(|e| self.explain(&e, schema))
    }

    /// A parse error as the author can act on it.
    fn explain(&self, e: &rhai::ParseError, schema: &Schema) -> LoadError {
        // An unbalanced brace confuses the parser from there on (into the next file, too):
        // what Rhai says is about a later token, often far from the brace.
        for (file, script) in &self.files {
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
            rhai::ParseErrorType::MissingToken(token, _) if token == ";" => self.located(
                syntax::missing_semicolon(&self.text, e.1),
                "missing ; at the end of this statement".into(),
            ),
            error => self.located(e.1, explain_compile_error(error, &self.text, schema)),
        }
    }

    /// The functions callable as handlers (one parameter), each route's among them.
    fn handlers(
        &self,
        ast: &AST,
        routes: &[Route],
        manifest: &str,
    ) -> Result<HashMap<String, Handler>, LoadError> {
        let handlers: HashMap<String, Handler> = ast
            .iter_functions()
            .filter(|f| f.params.len() == 1)
            .map(|f| {
                let handler = Handler {
                    definition: definition_position(&self.text, f.name),
                    fields: request_fields(ast, f.name),
                };
                (f.name.to_string(), handler)
            })
            .collect();
        for route in routes {
            let Some(guard) = &route.guard else {
                continue;
            };
            if handlers.contains_key(guard) {
                continue;
            }
            let pattern = format!("{} {}", route.method, route.path);
            let missing = format!(
                "route {pattern:?} is guarded by {guard:?}, but no script defines fn \
                 {guard}(request)"
            );
            return Err(self.not_callable(ast, manifest, guard, (&pattern, "its guard"), missing));
        }
        let Some(route) = routes.iter().find(|r| !handlers.contains_key(&r.handler)) else {
            return Ok(handlers);
        };
        let handler = &route.handler;
        let route = format!("{} {}", route.method, route.path);
        let missing = format!(
            "route {route:?} names handler {handler:?}, but no script defines fn \
             {handler}(request)"
        );
        Err(self.not_callable(ast, manifest, handler, (&route, "a handler"), missing))
    }

    /// Why route `route` cannot call `name` as `role` (one parameter, the request): it is
    /// defined with other parameters (placed at the function: that is what to change, more
    /// often than the route), or not at all (`missing`, placed in the manifest).
    fn not_callable(
        &self,
        ast: &AST,
        manifest: &str,
        name: &str,
        (route, role): (&str, &str),
        missing: String,
    ) -> LoadError {
        match ast.iter_functions().find(|f| f.name == name) {
            Some(function) => self.located(
                definition_position(&self.text, name),
                format!(
                    "fn {name} is defined with {} parameters, but route {route:?} calls it as \
                     {role}, which takes one (request)",
                    function.params.len()
                ),
            ),
            None => manifest_error(manifest, missing),
        }
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
