//! Load-time checks of an app's scripts over Rhai's AST: calls that reach no function, names
//! that cannot be variables, what of its request a handler can observe, and what a parse error
//! means.

use std::collections::HashSet;

use rhai::{ASTNode, Engine, Expr, FnCallExpr, ImmutableString, Position, Stmt, AST};

use crate::script::settings::Settings;
use crate::script::value::RequestFields;
use crate::state::schema::Schema;

/// Whether scripts could not use `name` as a variable: a word of the language (`let`, `true`,
/// a reserved one) or `request`, the name handlers give their parameter, which would hide it.
pub(crate) fn is_script_word(name: &str) -> bool {
    if name == "request" {
        return true;
    }
    let parsed = Engine::new_raw().compile_expression(name);
    !matches!(
        parsed.as_ref().map(|ast| ast.statements()),
        Ok([Stmt::Expr(expr)]) if matches!(**expr, Expr::Variable(..))
    )
}

/// The entries of the request map that handler `name` can observe. A handler that uses its
/// parameter only as `request.field...` or `request["field"]...` (a literal name) sees nothing
/// of the others, so they need not be built for it: the head's headers map, above all, is work
/// on every call that most handlers never read. Any other use (passing the request on,
/// `request.keys()`, printing it, a computed index) observes the whole map.
pub(crate) fn request_fields(ast: &AST, name: &str) -> RequestFields {
    let mut alone = ast.clone_functions_only();
    alone.retain_functions(|_, _, n, arity| n == name && arity == 1);
    let Some(param) = alone.iter_fn_def().next().map(|f| f.params[0].clone()) else {
        return RequestFields::ALL;
    };
    let mut fields = RequestFields::NONE;
    alone.walk(&mut |path: &[ASTNode]| {
        // Rhai's walk does not visit the value of `break value`: whatever it holds, assume
        // the whole request.
        if let Some(ASTNode::Stmt(Stmt::BreakLoop(Some(_), ..))) = path.last() {
            fields = RequestFields::ALL;
            return true;
        }
        let Some(ASTNode::Expr(node @ Expr::Variable(variable, ..))) = path.last() else {
            return true;
        };
        if variable.1 != param {
            return true;
        }
        let parent = path.len().checked_sub(2).map(|at| &path[at]);
        let field = match parent {
            Some(ASTNode::Expr(Expr::Dot(chain, ..))) if std::ptr::eq(&chain.lhs, *node) => {
                match &chain.rhs {
                    Expr::Property(property, _) => Some(property.2.as_str()),
                    Expr::Dot(inner, ..) | Expr::Index(inner, ..) => match &inner.lhs {
                        Expr::Property(property, _) => Some(property.2.as_str()),
                        _ => None,
                    },
                    _ => None,
                }
            }
            Some(ASTNode::Expr(Expr::Index(chain, ..))) if std::ptr::eq(&chain.lhs, *node) => {
                match &chain.rhs {
                    Expr::StringConstant(text, _) => Some(text.as_str()),
                    _ => None,
                }
            }
            _ => None,
        };
        fields = fields.with(field.map_or(RequestFields::ALL, RequestFields::named));
        true
    });
    fields
}

/// Rhai's parse error, with what Pure knows of the mistake: a name that is not defined is
/// often a table's, misspelt, or a top-level constant, which handlers never see (they run
/// without the top level).
pub(crate) fn explain_compile_error(
    error: &rhai::ParseErrorType,
    text: &str,
    schema: &Schema,
) -> String {
    let rhai::ParseErrorType::VariableUndefined(name) = error else {
        return error.to_string();
    };
    let top_level = Engine::new_raw().compile(text).ok().is_some_and(|ast| {
        ast.statements()
            .iter()
            .any(|stmt| matches!(stmt, Stmt::Var(var, ..) if var.0.as_str() == name))
    });
    if top_level {
        return format!(
            "{name} is defined at the top level, which handlers never run: define it inside the \
             function, or make it a function (fn {}() {{ ... }})",
            name.to_lowercase()
        );
    }
    let tables: Vec<&str> = schema
        .tables
        .iter()
        .map(|t| t.name.as_str())
        .filter(|name| !crate::state::schema::is_hidden(name))
        .collect();
    format!(
        "no variable or table named {name} (the app's tables: {})",
        if tables.is_empty() {
            "none".to_string()
        } else {
            tables.join(", ")
        }
    )
}

/// `curry` nests values in function pointers, which neither the depth rule nor Rhai's size
/// checks look into: `f = Fn("g").curry(take(f))` built a million levels in half a second, and
/// Rhai's drop of them overflowed the server's stack. With closures off (`no_closure`), it is
/// the only way a value holds a value outside arrays and maps, so its calls do not load (the
/// word itself stays free: a property or a variable named `curry` is fine).
const CURRY: &str = "curry";
const CURRY_REFUSED: &str = "curry is not available: a function pointer's curried values are \
                             outside what the server can bound (pass the values as arguments \
                             instead)";

/// Rhai's own functions that are syntax rather than registered functions.
const KEYWORD_FUNCTIONS: [&str; 10] = [
    "print",
    "debug",
    "type_of",
    "eval",
    "Fn",
    "call",
    "curry",
    "is_shared",
    "is_def_var",
    "is_def_fn",
];

/// Every call of a function by name (not a method) must reach one: a script function with that
/// many parameters, or a built-in one. Rhai would only say so when the call runs.
/// The names of the functions the engine has (Rhai's and Pure's), to tell a call of a function
/// nothing defines.
pub(crate) fn builtin_names(engine: &Engine) -> HashSet<String> {
    engine
        .gen_fn_signatures(true)
        .into_iter()
        .filter_map(|signature| signature.split('(').next().map(str::to_string))
        .collect()
}

pub(crate) fn check_calls(ast: &AST, builtin: &HashSet<String>) -> Result<(), (Position, String)> {
    let scripts: Vec<(ImmutableString, usize)> = ast
        .iter_fn_def()
        .map(|f| (f.name.clone(), f.params.len()))
        .collect();
    let mut found = Ok(());
    ast.walk(&mut |path: &[ASTNode]| {
        // A call is an expression, or a statement of its own; a method call is checked only for
        // `curry`.
        let (call, position) = match path.last() {
            Some(ASTNode::Expr(expr @ Expr::FnCall(call, ..))) => (call, expr.position()),
            Some(ASTNode::Stmt(Stmt::FnCall(call, position))) => (call, *position),
            Some(ASTNode::Expr(expr @ Expr::MethodCall(call, ..))) if call.name == CURRY => {
                (call, expr.position())
            }
            _ => return true,
        };
        let name = call.name.as_str();
        if name == CURRY {
            found = Err((position, CURRY_REFUSED.to_string()));
            return false;
        }
        if call.is_operator_call()
            || !name
                .chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
            || KEYWORD_FUNCTIONS.contains(&name)
            || builtin.contains(name)
            || scripts
                .iter()
                .any(|(n, arity)| n == name && *arity == call.args.len())
        {
            return true;
        }
        let defined: Vec<usize> = scripts
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, arity)| *arity)
            .collect();
        let message = match defined.as_slice() {
            [] => format!("no function {name}(): no script defines it, and it is not built in"),
            arities => format!(
                "{name}() is called with {} argument(s), but fn {name} takes {}",
                call.args.len(),
                arities
                    .iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        };
        found = Err((position, message));
        false
    });
    found
}

/// Answers the loader can see are lost: a route's handler or guard whose last statement is a
/// `let` or an assignment (its answer is always `null`, which is never what it meant), and a
/// `respond(...)` whose value is dropped because it is a statement not at the end of its
/// function (the handler goes on as if nothing had been answered), or a call, as a statement,
/// of a script function whose answer may be such a `respond(...)`.
pub(crate) fn check_answers(ast: &AST, routed: &[&str]) -> Result<(), (Position, String)> {
    let bodies: Vec<(ImmutableString, usize, Vec<Stmt>)> = ast
        .iter_fn_def()
        .map(|function| {
            let (name, arity) = (function.name.clone(), function.params.len());
            (name.clone(), arity, statements_of(ast, &name, arity))
        })
        .collect();
    // The functions whose answer may be a `respond(...)`: those that end with one, and those
    // that end with a call of one of them, to a fixed point.
    let mut responders: HashSet<(ImmutableString, usize)> = HashSet::new();
    loop {
        let before = responders.len();
        for (name, arity, statements) in &bodies {
            if may_respond(statements, &responders) {
                responders.insert((name.clone(), *arity));
            }
        }
        if responders.len() == before {
            break;
        }
    }
    for (name, arity, statements) in &bodies {
        respond_dropped(statements, true, &responders)?;
        if !routed.contains(&name.as_str()) || *arity != 1 {
            continue;
        }
        let ending = match statements.last() {
            Some(Stmt::Var(var, ..)) => Some(format!(
                "fn {name} ends with a let, so it always answers null: end it with the value \
                 to answer ({})",
                var.0.name
            )),
            Some(Stmt::Assignment(..)) => Some(format!(
                "fn {name} ends with an assignment, so it always answers null: end it with the \
                 value to answer"
            )),
            _ => None,
        };
        if let (Some(message), Some(last)) = (ending, statements.last()) {
            return Err((last.position(), message));
        }
    }
    Ok(())
}

/// An AST of the functions `name` of `arity` alone (one, unless the scripts define it twice).
pub(crate) fn function_alone(ast: &AST, name: &str, arity: usize) -> AST {
    // (`clone_functions_only_filtered` ignores its filter in Rhai 1.27: a new module's
    // functions are cloned whole; `retain_functions` filters.)
    let mut alone = ast.clone_functions_only();
    alone.retain_functions(|_, _, n, a| n == name && a == arity);
    alone
}

fn statements_of(ast: &AST, name: &str, arity: usize) -> Vec<Stmt> {
    statements(&function_alone(ast, name, arity))
}

/// The statements of the one function of `alone`, reached by walking it (a function's body is
/// not public in Rhai's API): the walk's paths of one node are its statements.
pub(crate) fn statements(alone: &AST) -> Vec<Stmt> {
    let mut statements = Vec::new();
    alone.walk(&mut |path: &[ASTNode]| {
        if let [ASTNode::Stmt(statement)] = path {
            statements.push((*statement).clone());
        }
        true
    });
    statements
}

/// Whether a call is `respond(...)` or of a script function that may answer with one.
fn answers_with_respond(call: &FnCallExpr, responders: &HashSet<(ImmutableString, usize)>) -> bool {
    call.name == "respond" || responders.contains(&(call.name.clone(), call.args.len()))
}

/// Whether the answer of `statements` (their last, through `if`, blocks and `try`) may be a
/// `respond(...)`.
fn may_respond(statements: &[Stmt], responders: &HashSet<(ImmutableString, usize)>) -> bool {
    match statements.last() {
        Some(Stmt::FnCall(call, _)) => answers_with_respond(call, responders),
        Some(Stmt::Expr(expr)) => {
            matches!(&**expr, Expr::FnCall(call, _) if answers_with_respond(call, responders))
        }
        Some(Stmt::Return(Some(expr), ..)) => {
            matches!(&**expr, Expr::FnCall(call, _) if answers_with_respond(call, responders))
        }
        Some(Stmt::If(flow, _)) | Some(Stmt::TryCatch(flow, _)) => {
            may_respond(flow.body.statements(), responders)
                || may_respond(flow.branch.statements(), responders)
        }
        Some(Stmt::Block(block)) => may_respond(block.statements(), responders),
        _ => false,
    }
}

/// A `respond(...)` statement of `statements` (or a call of a function whose answer may be
/// one) that is not their answer. `tail`: whether the last of them is the function's answer.
/// Loops never answer; `switch` is not looked into.
fn respond_dropped(
    statements: &[Stmt],
    tail: bool,
    responders: &HashSet<(ImmutableString, usize)>,
) -> Result<(), (Position, String)> {
    for (at, statement) in statements.iter().enumerate() {
        let answers = tail && at + 1 == statements.len();
        match statement {
            Stmt::FnCall(call, position) if !answers && answers_with_respond(call, responders) => {
                let message = if call.name == "respond" {
                    "this respond(...) is not the function's answer: its answer is dropped and \
                     the handler goes on; write return respond(...)"
                        .to_string()
                } else {
                    format!(
                        "{}() may answer with respond(...), and here its answer is dropped and \
                         the handler goes on; write return {}(...)",
                        call.name, call.name
                    )
                };
                return Err((*position, message));
            }
            Stmt::If(flow, _) | Stmt::TryCatch(flow, _) => {
                respond_dropped(flow.body.statements(), answers, responders)?;
                respond_dropped(flow.branch.statements(), answers, responders)?;
            }
            Stmt::Block(block) => respond_dropped(block.statements(), answers, responders)?,
            Stmt::While(flow, _) | Stmt::Do(flow, ..) => {
                respond_dropped(flow.body.statements(), false, responders)?
            }
            Stmt::For(each, _) => respond_dropped(each.2.body.statements(), false, responders)?,
            _ => {}
        }
    }
    Ok(())
}

/// `env("NAME")` with a literal name must name a declared setting or secret: otherwise every
/// call would fail.
pub(crate) fn check_env(ast: &AST, settings: &Settings) -> Result<(), (Position, String)> {
    // A script's own `fn env(name)` is what its calls run.
    let own_env = ast
        .iter_fn_def()
        .any(|f| f.name == "env" && f.params.len() == 1);
    let mut found = Ok(());
    ast.walk(&mut |path: &[ASTNode]| {
        let (call, position) = match path.last() {
            Some(ASTNode::Expr(expr @ Expr::FnCall(call, ..))) => (call, expr.position()),
            Some(ASTNode::Stmt(Stmt::FnCall(call, position))) => (call, *position),
            _ => return true,
        };
        let [Expr::StringConstant(name, _)] = &call.args[..] else {
            return true;
        };
        if call.name != "env" || settings.get(name).is_some() || own_env {
            return true;
        }
        let mut names: Vec<&str> = settings.names().collect();
        names.sort();
        let declared = if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        };
        found = Err((
            position,
            format!(
                "env({name:?}): {name} is not declared: add it to app.json's \"env\" (a setting) \
                 or \"secrets\" (declared: {declared})"
            ),
        ));
        false
    });
    found
}

/// A `schedule(delay, "name", ...)` or `schedule_at(time, "name", ...)` whose literal name is no
/// function the app can run as a handler (one parameter, the request): a load error, rather
/// than a 500 at the call.
pub(crate) fn check_schedules(ast: &AST, handlers: &[String]) -> Result<(), (Position, String)> {
    let mut found = Ok(());
    ast.walk(&mut |path: &[ASTNode]| {
        let (call, position) = match path.last() {
            Some(ASTNode::Expr(expr @ Expr::FnCall(call, ..))) => (call, expr.position()),
            Some(ASTNode::Stmt(Stmt::FnCall(call, position))) => (call, *position),
            _ => return true,
        };
        if !matches!(call.name.as_str(), "schedule" | "schedule_at") || call.args.len() < 2 {
            return true;
        }
        let Expr::StringConstant(name, _) = &call.args[1] else {
            return true;
        };
        if handlers.iter().any(|h| h == name.as_str()) {
            return true;
        }
        found = Err((
            position,
            format!(
                "{}(..., {name:?}, ...): no script defines fn {name}(request) to run",
                call.name
            ),
        ));
        false
    });
    found
}
