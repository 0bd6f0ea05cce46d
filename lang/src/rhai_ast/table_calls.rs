//! The load-time check of calls on tables: `items.updat(row)`, `items.update(k, row)` and
//! `items.by_nme.find(x)` would otherwise load and then fail every call that reaches them.
//!
//! Only calls made directly on a table's name are checked, as the compiler sees them (the
//! handle kept in a variable first is checked when it runs). A table name that some script
//! also uses for a local or a parameter is left alone: there the name may mean the local.

use std::collections::HashSet;

use rhai::{ASTNode, Expr, Position, Stmt, AST};

use crate::script::api::TABLE_METHODS;
use crate::script::error::edits;
use crate::state::schema::Schema;
use crate::state::tables::IndexDef;

/// Rhai's functions that take a value of any type, so a table too.
const ANY_VALUE: [&str; 5] = ["type_of", "to_string", "to_debug", "is_shared", "tag"];

/// What each table method takes after the table, for a message about a wrong count.
fn usage(method: &str) -> &'static str {
    match method {
        "get" | "exists" | "delete" => "the key: 1 to 4 parts, as in t.get(k) or t.get(a, b)",
        "insert" | "put" => "the key's 1 to 4 parts, then the row, as in t.insert(k, #{ f: v })",
        "put_all" => "a map from key to row, or a map from key to value and the field's name",
        "delete_all" => "an array of keys",
        "update" => "one row read from the table and changed: row.f = v; t.update(row)",
        "scan" | "scan_rev" => "(low, high, limit)",
        "first" | "last" => "(low, high)",
        _ => "nothing",
    }
}

/// The first call on a table that cannot work: a method tables do not have, a wrong number of
/// arguments, an index the table does not have.
pub(crate) fn check(
    ast: &AST,
    schema: &Schema,
    indexes: &[IndexDef],
    builtin: &HashSet<String>,
) -> Result<(), (Position, String)> {
    let mut locals = HashSet::new();
    for function in ast.iter_fn_def() {
        locals.extend(function.params.iter().map(|p| p.to_string()));
    }
    ast.walk(&mut |path: &[ASTNode]| {
        match path.last() {
            Some(ASTNode::Stmt(Stmt::Var(variable, ..))) => {
                locals.insert(variable.0.name.to_string());
            }
            Some(ASTNode::Stmt(Stmt::For(header, ..))) => {
                locals.insert(header.0.name.to_string());
                if let Some(counter) = &header.1 {
                    locals.insert(counter.name.to_string());
                }
            }
            Some(ASTNode::Stmt(Stmt::TryCatch(flow, ..))) => {
                if let Expr::Variable(variable, ..) = &flow.expr {
                    locals.insert(variable.1.to_string());
                }
            }
            _ => {}
        }
        true
    });
    let scripts: Vec<(String, usize)> = ast
        .iter_fn_def()
        .map(|f| (f.name.to_string(), f.params.len()))
        .collect();
    let mut found = Ok(());
    ast.walk(&mut |path: &[ASTNode]| {
        let Some(ASTNode::Expr(Expr::Dot(chain, ..))) = path.last() else {
            return true;
        };
        let Expr::Variable(variable, ..) = &chain.lhs else {
            return true;
        };
        let table = variable.1.as_str();
        let Some(id) = schema.table_id(table) else {
            return true;
        };
        if locals.contains(table) {
            return true;
        }
        let problem = match &chain.rhs {
            Expr::MethodCall(call, position) => {
                method_problem(table, &call.name, call.args.len(), builtin, &scripts)
                    .map(|message| (*position, message))
            }
            Expr::Dot(inner, ..) => match (&inner.lhs, &inner.rhs) {
                (Expr::Property(property, position), Expr::MethodCall(..) | Expr::Dot(..)) => {
                    let name = property.2.as_str();
                    let own: Vec<&str> = indexes
                        .iter()
                        .filter(|d| d.table == id)
                        .map(|d| d.name.as_str())
                        .collect();
                    (!own.contains(&name)).then(|| {
                        let known = match own.as_slice() {
                            [] => "it has none; declare them in app.json's \"indexes\"".into(),
                            own => format!("its indexes: {}", own.join(", ")),
                        };
                        (
                            *position,
                            format!("table {table} has no index {name} ({known})"),
                        )
                    })
                }
                _ => None,
            },
            _ => None,
        };
        match problem {
            Some(problem) => {
                found = Err(problem);
                false
            }
            None => true,
        }
    });
    found
}

fn method_problem(
    table: &str,
    method: &str,
    args: usize,
    builtin: &HashSet<String>,
    scripts: &[(String, usize)],
) -> Option<String> {
    // A script function called as a method gets the table as `this` (same count of arguments),
    // or as its first argument (one more). Rhai prefers the `this` form to a table method of the
    // same name: a handler `fn get(request)` turns every `t.get(k)` into a call of the handler,
    // which a reader of the script cannot see. (With the table as first argument the table
    // method still wins.)
    let shadows = scripts
        .iter()
        .any(|(n, arity)| n == method && *arity == args);
    if scripts
        .iter()
        .any(|(n, arity)| n == method && (*arity == args || *arity == args + 1))
    {
        return (shadows && TABLE_METHODS.iter().any(|(name, ..)| *name == method)).then(|| {
            format!(
                "{table}.{method}() would call the script's function {method}(), not the \
                 table method: Rhai calls a script function of the same name in its \
                 place. Rename the function (and its handler name in app.json)"
            )
        });
    }
    match TABLE_METHODS.iter().find(|(name, ..)| *name == method) {
        Some(&(_, least, most)) if (least..=most).contains(&args) => None,
        Some(_) => Some(format!(
            "{table}.{method}() is given {args} argument(s); it takes {}",
            usage(method)
        )),
        // Rhai's own functions that take any value work on a table too.
        None if ANY_VALUE.contains(&method) && builtin.contains(method) => None,
        None => {
            let names: Vec<&str> = TABLE_METHODS.iter().map(|(name, ..)| *name).collect();
            let near = names.iter().find(|n| edits(n, method) <= 2);
            Some(match near {
                Some(near) => {
                    format!("tables have no method {method}(): did you mean {table}.{near}()?")
                }
                None => format!(
                    "tables have no method {method}() (they have {})",
                    names.join(", ")
                ),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::state::schema::TableSchema;

    /// `TABLE_METHODS` says what the engine has: each registered table method with each count of
    /// arguments it takes, and nothing else.
    #[test]
    fn the_table_methods_are_those_registered() {
        let schema = Arc::new(Schema {
            tables: vec![TableSchema {
                name: "t".into(),
                fields: vec!["f".into()],
                types: Vec::new(),
            }],
        });
        let engine =
            crate::script::engine::build(&schema, &[], &crate::script::limits::Limits::default());
        let mut registered: HashSet<(String, usize)> = HashSet::new();
        for signature in engine.gen_fn_signatures(false) {
            let Some((name, rest)) = signature.split_once('(') else {
                continue;
            };
            let params = rest.split(')').next().unwrap_or("");
            let mut params = params.split(", ");
            if params.next().is_some_and(|first| first.ends_with("Table")) {
                registered.insert((name.to_string(), params.count()));
            }
        }
        let declared: HashSet<(String, usize)> = TABLE_METHODS
            .iter()
            .flat_map(|&(name, least, most)| (least..=most).map(move |n| (name.to_string(), n)))
            .collect();
        assert_eq!(registered, declared);
    }
}
