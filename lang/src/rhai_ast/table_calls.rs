//! The load-time checks of calls on tables and of rows' fields: `items.updat(row)`,
//! `items.update(k, row)`, `items.by_nme.find(x)` and `let r = items.get(k); r.nme` would
//! otherwise load and then fail every call that reaches them.
//!
//! Only calls made directly on a table's name are checked, as the compiler sees them (the
//! handle kept in a variable first is checked when it runs). A table name that some script
//! also uses for a local or a parameter is left alone: there the name may mean the local.

use std::collections::{HashMap, HashSet};

use rhai::{ASTNode, Expr, Position, Stmt, AST};

use crate::script::api::TABLE_METHODS;
use crate::script::error::edits;
use crate::state::schema::{Schema, TableId};
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
        "scan_page" | "scan_rev_page" => {
            "(low, high, limit, after): after is () or the next of the page before"
        }
        "first" | "last" => "(low, high)",
        "next_id" => "nothing: t.next_id()",
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
    let locals = local_names(ast);
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

/// The first property read or written on a row that its table does not declare:
/// `let r = items.get(k); r.nme` would load and then fail every call that reaches it. A local is
/// known to hold a row (or `()`) of a table when its function declares it once, as
/// `let r = t.get(..)` (or `first`, `last`) or as the variable of `for r in t.scan(..)` (or
/// `scan_rev`), and never assigns it again; no other local is looked at. `t.get(k).field` is
/// looked at too.
pub(crate) fn check_row_fields(ast: &AST, schema: &Schema) -> Result<(), (Position, String)> {
    let shadowed = local_names(ast);
    // A script function called as a method on a local gets the local as `this`, and may assign
    // it anything.
    let script_functions: HashSet<String> = ast.iter_fn_def().map(|f| f.name.to_string()).collect();
    // Which table's row `lhs.rhs` gives, when it is one of `methods` called on a table's name.
    let call_on_table = |lhs: &Expr, rhs: &Expr, methods: &[&str]| -> Option<TableId> {
        let (Expr::Variable(table, ..), Expr::MethodCall(call, _)) = (lhs, rhs) else {
            return None;
        };
        if shadowed.contains(table.1.as_str()) || !methods.contains(&call.name.as_str()) {
            return None;
        }
        schema.table_id(table.1.as_str())
    };
    let source = |expr: &Expr, methods: &[&str]| match expr {
        Expr::Dot(chain, ..) => call_on_table(&chain.lhs, &chain.rhs, methods),
        _ => None,
    };
    for function in ast.iter_fn_def() {
        let (name, arity) = (function.name.clone(), function.params.len());
        let mut alone = ast.clone_functions_only();
        alone.retain_functions(move |_, _, n, a| n == name && a == arity);
        let mut declared: HashMap<String, usize> = HashMap::new();
        for param in &function.params {
            *declared.entry(param.to_string()).or_default() += 1;
        }
        let mut assigned: HashSet<String> = HashSet::new();
        let mut rows: HashMap<String, TableId> = HashMap::new();
        alone.walk(&mut |path: &[ASTNode]| {
            match path.last() {
                Some(ASTNode::Stmt(Stmt::Var(variable, ..))) => {
                    let name = variable.0.name.to_string();
                    *declared.entry(name.clone()).or_default() += 1;
                    if let Some(table) = source(&variable.1, &["get", "first", "last"]) {
                        rows.insert(name, table);
                    }
                }
                Some(ASTNode::Stmt(Stmt::For(header, ..))) => {
                    let name = header.0.name.to_string();
                    *declared.entry(name.clone()).or_default() += 1;
                    if let Some(counter) = &header.1 {
                        *declared.entry(counter.name.to_string()).or_default() += 1;
                    }
                    if let Some(table) = source(&header.2.expr, &["scan", "scan_rev"]) {
                        rows.insert(name, table);
                    }
                }
                Some(ASTNode::Stmt(Stmt::TryCatch(flow, ..))) => {
                    // `catch (e)` declares `e` for its block.
                    if let Expr::Variable(variable, ..) = &flow.expr {
                        *declared.entry(variable.1.to_string()).or_default() += 1;
                    }
                }
                Some(ASTNode::Stmt(Stmt::Assignment(assignment))) => {
                    if let Expr::Variable(variable, ..) = &assignment.1.lhs {
                        assigned.insert(variable.1.to_string());
                    }
                }
                Some(ASTNode::Expr(Expr::Dot(chain, ..))) => {
                    // `r.f()` of a script function `f`, or `r.call(f)` of a function pointer:
                    // `this = ..` in `f` assigns `r`.
                    let first = match &chain.rhs {
                        Expr::Dot(inner, ..) | Expr::Index(inner, ..) => &inner.lhs,
                        other => other,
                    };
                    if let (Expr::Variable(variable, ..), Expr::MethodCall(call, _)) =
                        (&chain.lhs, first)
                    {
                        if call.name == "call" || script_functions.contains(call.name.as_str()) {
                            assigned.insert(variable.1.to_string());
                        }
                    }
                }
                _ => {}
            }
            true
        });
        // A local named like a table is the table outside its scope (before its `let`, after
        // its block): `name.x` there is no row's field.
        rows.retain(|name, _| {
            declared.get(name) == Some(&1)
                && !assigned.contains(name)
                && schema.table_id(name).is_none()
        });
        let mut found = Ok(());
        alone.walk(&mut |path: &[ASTNode]| {
            let Some(ASTNode::Expr(Expr::Dot(chain, ..))) = path.last() else {
                return true;
            };
            let Expr::Variable(variable, ..) = &chain.lhs else {
                return true;
            };
            // The property of the first step after `row`, or after `t.get(..)` itself.
            let property = |step: &Expr| match step {
                Expr::Property(property, at) => Some((property.2.clone(), *at)),
                Expr::Dot(inner, ..) => match &inner.lhs {
                    Expr::Property(property, at) => Some((property.2.clone(), *at)),
                    _ => None,
                },
                _ => None,
            };
            let (table, (field, at), row) = match rows.get(variable.1.as_str()) {
                Some(&table) => match property(&chain.rhs) {
                    Some(found) => (table, found, variable.1.to_string()),
                    None => return true,
                },
                None => {
                    let Expr::Dot(inner, ..) = &chain.rhs else {
                        return true;
                    };
                    // `t.get(k).field`.
                    let Some(table) =
                        call_on_table(&chain.lhs, &inner.lhs, &["get", "first", "last"])
                    else {
                        return true;
                    };
                    match property(&inner.rhs) {
                        Some(found) => {
                            let call = format!("{}.{}(..)", variable.1, call_name(&inner.lhs));
                            (table, found, call)
                        }
                        None => return true,
                    }
                }
            };
            let field = field.as_str();
            // `tag` is Rhai's property of every value (a getter and a setter on `Dynamic`).
            if field == "key" || field == "tag" || schema.field_slot(table, field).is_some() {
                return true;
            }
            let declared = &schema.table(table).fields;
            let near = declared.iter().find(|f| edits(f, field) <= 2);
            found = Err((
                at,
                format!(
                    "{row} is a row of table {}, which has no field {field:?}{} (declared: {})",
                    schema.table(table).name,
                    near.map(|n| format!(": did you mean {n:?}?"))
                        .unwrap_or_default(),
                    declared.join(", ")
                ),
            ));
            false
        });
        found?;
    }
    Ok(())
}

/// The name of a method call's function, or "" for another expression.
fn call_name(expr: &Expr) -> &str {
    match expr {
        Expr::MethodCall(call, _) => call.name.as_str(),
        _ => "",
    }
}

/// Every name a script declares as a local, a loop variable, a caught error or a parameter.
fn local_names(ast: &AST) -> HashSet<String> {
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
    locals
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
