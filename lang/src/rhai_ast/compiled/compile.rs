//! From Rhai's AST to closures.
//!
//! Covered: `let`/`const`, assignment and the arithmetic op-assignments to a local, to a property
//! or to an index of a local; `if`, `while`, `loop`, `do`, `for` over a range, an array or a
//! string's `chars()`, `break`, `continue`, `return`, `throw`; literals (numbers, strings,
//! characters, interpolated strings, arrays, maps); property, index and method chains; the
//! operators `+ - * / % == != < <= > >= & | ^ ! && || ??`; calls of script functions, `type_of`
//! and `parse_int`; the table and row API, `push`, `len`, `contains` (of a string or a map) and
//! `sub_string(start, len)`. Anything else (`switch`, `try`, closures, other built-in functions,
//! a name that a script function redefines) leaves the whole handler, and every handler that
//! calls it, to Rhai.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rhai::{
    ASTFlags, BinaryExpr, Dynamic, Expr, FnCallExpr, ImmutableString, Map, Position, Stmt, AST,
};

use super::ops::{self, BinOp, Method, Property};
use super::{Code, Frame, Function, Outcome, Program, Stop};
use crate::script::api::{IndexRef, Table};
use crate::script::error::SourceMap;
use crate::state::schema::{Schema, TableId};
use crate::state::tables::IndexDef;

type Compiled<T> = Result<T, Refusal>;

/// A construct the compiler does not cover, and where it is: what the user reads to learn why a
/// handler runs in Rhai.
#[derive(Clone)]
struct Refusal {
    at: Position,
    what: String,
}

fn refuse<T>(at: Position, what: impl Into<String>) -> Compiled<T> {
    Err(Refusal {
        at,
        what: what.into(),
    })
}

/// Operations charged per expression node (see `Compiler::stmt`): one above the most Rhai was
/// measured to charge, as a margin.
const CHARGE_PER_NODE: u64 = 4;

pub(crate) fn compile_program(
    ast: &AST,
    schema: &Schema,
    indexes: &[IndexDef],
    handlers: &[String],
    sources: &SourceMap,
) -> Program {
    let definitions: Vec<_> = ast.iter_fn_def().collect();
    let index: HashMap<(ImmutableString, usize), usize> = definitions
        .iter()
        .enumerate()
        .map(|(i, f)| ((f.name.clone(), f.params.len()), i))
        .collect();
    let script_names: HashSet<ImmutableString> =
        definitions.iter().map(|f| f.name.clone()).collect();

    // Rhai does not export the type of a function's body, but its walk visits a function's
    // statements in order as paths of length one: walking an AST that holds only that function
    // gives exactly its statements.
    let mut compilers = Vec::new();
    let mut bodies: Vec<Compiled<Vec<Code>>> = Vec::new();
    for definition in &definitions {
        let mut compiler = Compiler {
            schema,
            indexes,
            index: &index,
            script_names: &script_names,
            scope: definition
                .params
                .iter()
                .map(|p| Local::new(p.clone()))
                .collect(),
            slots: definition.params.len(),
            callees: Vec::new(),
            nodes: 0,
            changes_first_parameter: false,
        };
        let (name, arity) = (definition.name.clone(), definition.params.len());
        // (`clone_functions_only_filtered` ignores its filter in Rhai 1.27: a new module's
        // functions are cloned whole; `retain_functions` filters.)
        let mut alone = ast.clone_functions_only();
        alone.retain_functions(move |_, _, n, a| n == name && a == arity);
        if alone.iter_fn_def().count() != 1 {
            bodies.push(refuse(
                Position::NONE,
                format!("a second fn {}() with the same parameters", definition.name),
            ));
            compilers.push(compiler);
            continue;
        }
        let mut body = Ok(Vec::new());
        alone.walk(&mut |path: &[rhai::ASTNode]| {
            if let ([rhai::ASTNode::Stmt(stmt)], Ok(codes)) = (path, &mut body) {
                match compiler.stmt(stmt) {
                    Ok(code) => codes.push(code),
                    Err(refusal) => body = Err(refusal),
                }
            }
            true
        });
        compilers.push(compiler);
        bodies.push(body);
    }

    let mut functions = Vec::new();
    // The construct a function cannot be compiled for, and which function it calls holds it
    // (none: its own body).
    let mut failures: Vec<Option<(Refusal, Option<usize>)>> = Vec::new();
    let mut callees = Vec::new();
    for (compiler, body) in compilers.into_iter().zip(bodies) {
        match body {
            Ok(codes) => {
                functions.push(Some(Function {
                    slots: compiler.slots,
                    body: sequence(codes),
                    keeps_first_parameter: !compiler.changes_first_parameter,
                }));
                failures.push(None);
            }
            Err(refusal) => {
                functions.push(None);
                failures.push(Some((refusal, None)));
            }
        }
        callees.push(compiler.callees);
    }
    // A function is usable when it and everything it calls compiled.
    loop {
        let mut changed = false;
        for i in 0..functions.len() {
            if failures[i].is_some() {
                continue;
            }
            if let Some(&bad) = callees[i].iter().find(|&&c| failures[c].is_some()) {
                let root = failures[bad].as_ref().map(|(root, _)| root.clone());
                failures[i] = root.map(|root| (root, Some(bad)));
                functions[i] = None;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }

    let mut compiled = HashMap::new();
    let mut interpreted = HashMap::new();
    for handler in handlers {
        let Some(&i) = index.get(&(ImmutableString::from(handler.as_str()), 1)) else {
            continue;
        };
        match &failures[i] {
            None => {
                compiled.insert(handler.clone(), i);
            }
            Some((refusal, via)) => {
                let (file, line, column) = sources.locate(refusal.at);
                let mut reason = format!("{} is not compiled", refusal.what);
                if line > 0 {
                    reason = format!("{file}:{line}:{column}: {reason}");
                }
                if let Some(via) = via {
                    reason += &format!(" (in {}(), which it calls)", definitions[*via].name);
                }
                interpreted.insert(handler.clone(), reason);
            }
        }
    }
    Program {
        functions,
        handlers: compiled,
        interpreted,
    }
}

struct Local {
    name: ImmutableString,
    constant: bool,
}

impl Local {
    fn new(name: ImmutableString) -> Local {
        Local {
            name,
            constant: false,
        }
    }
}

struct Compiler<'a> {
    schema: &'a Schema,
    indexes: &'a [IndexDef],
    index: &'a HashMap<(ImmutableString, usize), usize>,
    script_names: &'a HashSet<ImmutableString>,
    /// Locals in declaration order: a local's slot is its position here.
    scope: Vec<Local>,
    /// Slots the function needs (the most locals alive at once).
    slots: usize,
    callees: Vec<usize>,
    /// Expression nodes compiled so far, for charging operations (see `stmt`).
    nodes: u64,
    /// Some code may change the value in slot 0, the first parameter, in place: an assignment
    /// to it or into it, or a `push` or `save` on it. (A `let` never reuses slot 0, and every
    /// other use of a local reads it or copies it.)
    changes_first_parameter: bool,
}

/// The start of a chain: a local (borrowed in place), a table whose method the chain calls first
/// (called directly: a table as a `Dynamic` is a boxed custom type, two allocations a clone), a
/// declared index of a table whose method the chain calls first (`items.by_category.find(..)`),
/// or any other value.
enum Root {
    Local { slot: usize, constant: bool },
    Table(Table),
    Index(IndexRef),
    Value(Code),
}

enum Step {
    Property(Property),
    Index,
    Method(Method, usize),
}

/// Statements in order; the value of the last is the value of all.
fn sequence(mut codes: Vec<Code>) -> Code {
    match codes.len() {
        0 => unit(),
        1 => codes.pop().expect("one statement"),
        _ => {
            let last = codes.pop().expect("statements");
            Box::new(move |f| {
                for code in &codes {
                    let _ = code(f)?;
                }
                last(f)
            })
        }
    }
}

fn unit() -> Code {
    Box::new(|_| Ok(Dynamic::UNIT))
}

impl Compiler<'_> {
    fn local(&self, name: &str) -> Option<(usize, bool)> {
        self.scope
            .iter()
            .rposition(|l| l.name == name)
            .map(|slot| (slot, self.scope[slot].constant))
    }

    fn declare(&mut self, name: ImmutableString, constant: bool) -> usize {
        self.scope.push(Local { name, constant });
        self.slots = self.slots.max(self.scope.len());
        self.scope.len() - 1
    }

    /// The declared index `name` of `table`, if there is one.
    fn index_of(&self, table: TableId, name: &str) -> Option<IndexRef> {
        self.indexes
            .iter()
            .position(|def| def.table == table && def.name == name)
            .map(|id| IndexRef { id, table })
    }

    fn property(&self, name: &ImmutableString) -> Property {
        let slots: Arc<[Option<usize>]> = (0..self.schema.tables.len())
            .map(|t| self.schema.field_slot(t as TableId, name))
            .collect();
        Property {
            name: name.clone(),
            slots,
        }
    }

    fn block(&mut self, statements: &[Stmt]) -> Compiled<Code> {
        let mark = self.scope.len();
        let codes = statements
            .iter()
            .map(|s| self.stmt(s))
            .collect::<Compiled<Vec<Code>>>()?;
        self.scope.truncate(mark);
        Ok(sequence(codes))
    }

    /// A statement, charged at least as Rhai would charge it. Rhai counts an operation for every
    /// statement, every expression it evaluates and every step of calls and chains, up to three
    /// per expression node (measured on about 120 kinds of statement; an index chain ending in a
    /// row's field is the tightest). The compiled code charges each statement
    /// `CHARGE_PER_NODE` per expression node in it (nested blocks included, whether they run or
    /// not) plus two. Counting more than Rhai only sends a handler near the limit to Rhai early;
    /// counting less would let a handler run on that Rhai stops.
    fn stmt(&mut self, stmt: &Stmt) -> Compiled<Code> {
        let before = self.nodes;
        let code = self.stmt_body(stmt)?;
        let weight = CHARGE_PER_NODE * (self.nodes - before) + 2;
        let at = stmt.position();
        Ok(Box::new(move |f| {
            f.tick(weight).map_err(|stop| stop.leaving(at))?;
            code(f).map_err(|stop| stop.leaving(at))
        }))
    }

    fn stmt_body(&mut self, stmt: &Stmt) -> Compiled<Code> {
        Ok(match stmt {
            Stmt::Noop(_) => unit(),
            Stmt::Expr(expr) => {
                let code = self.expr(expr)?;
                Box::new(move |f| code(f))
            }
            Stmt::FnCall(call, at) => {
                let code = self.call(call, *at)?;
                Box::new(move |f| code(f))
            }
            Stmt::Block(block) => self.block(block.statements())?,
            Stmt::Var(var, flags, _) => {
                let (ident, value, _) = &**var;
                let value = self.expr(value)?;
                let slot = self.declare(ident.name.clone(), flags.contains(ASTFlags::CONSTANT));
                Box::new(move |f| {
                    let value = value(f)?;
                    *f.local(slot) = value;
                    Ok(Dynamic::UNIT)
                })
            }
            Stmt::Assignment(assignment) => {
                let (op, BinaryExpr { lhs, rhs }) = &**assignment;
                let op = match op.get_op_assignment_info() {
                    None => None,
                    Some((.., syntax)) => {
                        Some(BinOp::from_name(syntax).ok_or_else(|| Refusal {
                            at: stmt.position(),
                            what: format!("the operator {syntax}="),
                        })?)
                    }
                };
                self.assignment(op, lhs, rhs)?
            }
            Stmt::If(flow, _) => {
                let condition = self.expr(&flow.expr)?;
                let body = self.block(flow.body.statements())?;
                let branch = self.block(flow.branch.statements())?;
                Box::new(move |f| {
                    if ops::truth(&condition(f)?)? {
                        body(f)
                    } else {
                        branch(f)
                    }
                })
            }
            Stmt::While(flow, _) => {
                let before = self.nodes;
                let condition = match &flow.expr {
                    Expr::Unit(_) => None,
                    expr => Some(self.expr(expr)?),
                };
                let turn = CHARGE_PER_NODE * (self.nodes - before) + 2;
                let body = self.block(flow.body.statements())?;
                Box::new(move |f| {
                    loop {
                        f.tick(turn)?;
                        if let Some(condition) = &condition {
                            if !ops::truth(&condition(f)?)? {
                                break;
                            }
                        }
                        match body(f) {
                            Ok(_) | Err(Stop::Continue) => {}
                            Err(Stop::Break) => break,
                            Err(stop) => return Err(stop),
                        }
                    }
                    Ok(Dynamic::UNIT)
                })
            }
            Stmt::Do(flow, flags, _) => {
                let until = flags.contains(ASTFlags::NEGATED);
                let body = self.block(flow.body.statements())?;
                let before = self.nodes;
                let condition = self.expr(&flow.expr)?;
                let turn = CHARGE_PER_NODE * (self.nodes - before) + 2;
                Box::new(move |f| {
                    loop {
                        f.tick(turn)?;
                        match body(f) {
                            Ok(_) => {}
                            // As in Rhai: `continue` runs the body again without the condition.
                            Err(Stop::Continue) => continue,
                            Err(Stop::Break) => break,
                            Err(stop) => return Err(stop),
                        }
                        if ops::truth(&condition(f)?)? == until {
                            break;
                        }
                    }
                    Ok(Dynamic::UNIT)
                })
            }
            Stmt::For(for_loop, _) => {
                let (variable, counter, flow) = &**for_loop;
                self.for_loop(variable, counter.as_ref(), flow)?
            }
            Stmt::BreakLoop(None, flags, _) => {
                if flags.contains(ASTFlags::BREAK) {
                    Box::new(|_| Err(Stop::Break))
                } else {
                    Box::new(|_| Err(Stop::Continue))
                }
            }
            Stmt::Return(value, flags, _) => {
                let value = match value {
                    Some(value) => self.expr(value)?,
                    None => unit(),
                };
                if flags.contains(ASTFlags::BREAK) {
                    Box::new(move |f| Err(Stop::Throw(value(f)?)))
                } else {
                    Box::new(move |f| Err(Stop::Return(value(f)?)))
                }
            }
            Stmt::BreakLoop(Some(_), ..) => return refuse(stmt.position(), "break with a value"),
            Stmt::Switch(..) => return refuse(stmt.position(), "switch"),
            Stmt::TryCatch(..) => return refuse(stmt.position(), "try/catch"),
            _ => return refuse(stmt.position(), "this kind of statement"),
        })
    }

    fn for_loop(
        &mut self,
        variable: &rhai::Ident,
        counter: Option<&rhai::Ident>,
        flow: &rhai::FlowControl,
    ) -> Compiled<Code> {
        // `for i in a..b`: the range is never built. `for c in text.chars()`: only as a loop's
        // source, where Rhai's character stream and the characters themselves are the same.
        let mut range = None;
        let mut chars = None;
        let mut iterable = None;
        match &flow.expr {
            Expr::FnCall(call, _)
                if call.op_token.is_some()
                    && call.args.len() == 2
                    && (call.name == ".." || call.name == "..=") =>
            {
                self.nodes += 1;
                range = Some((
                    self.expr(&call.args[0])?,
                    self.expr(&call.args[1])?,
                    call.name == "..=",
                ));
            }
            Expr::Dot(chain, flags, _)
                if flags.is_empty()
                    && matches!(&chain.rhs, Expr::MethodCall(call, _)
                        if call.name == "chars" && call.args.is_empty())
                    && !self.script_names.contains("chars") =>
            {
                self.nodes += 2;
                chars = Some(self.expr(&chain.lhs)?);
            }
            expr => iterable = Some(self.expr(expr)?),
        }
        let mark = self.scope.len();
        let slot = self.declare(variable.name.clone(), false);
        let counter = counter.map(|c| self.declare(c.name.clone(), false));
        let body = self.block(flow.body.statements())?;
        self.scope.truncate(mark);

        // One turn of the loop; Ok(false) ends it.
        let turn = move |f: &mut Frame, n: usize, value: Dynamic| -> Result<bool, Stop> {
            f.tick(2)?;
            *f.local(slot) = value;
            if let Some(counter) = counter {
                *f.local(counter) = Dynamic::from_int(n as i64);
            }
            match body(f) {
                Ok(_) | Err(Stop::Continue) => Ok(true),
                Err(Stop::Break) => Ok(false),
                Err(stop) => Err(stop),
            }
        };
        if let Some(text) = chars {
            return Ok(Box::new(move |f| {
                let text = text(f)?;
                let text = text.as_immutable_string_ref().map_err(|_| Stop::Fallback)?;
                for (n, c) in text.chars().enumerate() {
                    if !turn(f, n, Dynamic::from_char(c))? {
                        break;
                    }
                }
                Ok(Dynamic::UNIT)
            }));
        }
        Ok(match (range, iterable) {
            (Some((low, high, inclusive)), _) => Box::new(move |f| {
                let low = low(f)?.as_int().map_err(|_| Stop::Fallback)?;
                let high = high(f)?.as_int().map_err(|_| Stop::Fallback)?;
                let end = if inclusive {
                    high as i128 + 1
                } else {
                    high as i128
                };
                let mut i = low as i128;
                let mut n = 0;
                while i < end {
                    if !turn(f, n, Dynamic::from_int(i as i64))? {
                        break;
                    }
                    i += 1;
                    n += 1;
                }
                Ok(Dynamic::UNIT)
            }),
            (None, Some(iterable)) => Box::new(move |f| {
                let value = iterable(f)?;
                if value.is_array() {
                    let items = value.into_array().map_err(|_| Stop::Fallback)?;
                    for (n, item) in items.into_iter().enumerate() {
                        if !turn(f, n, item)? {
                            break;
                        }
                    }
                    return Ok(Dynamic::UNIT);
                }
                // A range folded into a constant by Rhai's optimizer.
                let range = if let Some(r) = value.read_lock::<std::ops::Range<i64>>() {
                    r.start as i128..r.end as i128
                } else if let Some(r) = value.read_lock::<std::ops::RangeInclusive<i64>>() {
                    *r.start() as i128..*r.end() as i128 + 1
                } else {
                    return Err(Stop::Fallback);
                };
                for (n, i) in range.enumerate() {
                    if !turn(f, n, Dynamic::from_int(i as i64))? {
                        break;
                    }
                }
                Ok(Dynamic::UNIT)
            }),
            (None, None) => unreachable!("a loop has a range or an iterable"),
        })
    }

    fn assignment(&mut self, op: Option<BinOp>, lhs: &Expr, rhs: &Expr) -> Compiled<Code> {
        let value = self.expr(rhs)?;
        let target_local = |compiler: &mut Self, expr: &Expr| -> Compiled<usize> {
            match expr {
                Expr::Variable(variable, ..) => match compiler.local(&variable.1) {
                    Some((slot, false)) => {
                        compiler.changes_first_parameter |= slot == 0;
                        Ok(slot)
                    }
                    _ => refuse(expr.position(), format!("an assignment to {}", variable.1)),
                },
                _ => refuse(expr.position(), "an assignment to an expression"),
            }
        };
        Ok(match lhs {
            Expr::Variable(..) => {
                let slot = target_local(self, lhs)?;
                match op {
                    None => Box::new(move |f| {
                        let value = value(f)?;
                        *f.local(slot) = value;
                        Ok(Dynamic::UNIT)
                    }),
                    Some(op) => Box::new(move |f| {
                        let value = value(f)?;
                        let env = f.env;
                        let current = std::mem::take(f.local(slot));
                        *f.local(slot) = ops::binary(op, current, value, env)?;
                        Ok(Dynamic::UNIT)
                    }),
                }
            }
            Expr::Dot(chain, flags, _) if flags.is_empty() => {
                let Expr::Property(property, _) = &chain.rhs else {
                    return refuse(lhs.position(), "an assignment through a longer chain");
                };
                let slot = target_local(self, &chain.lhs)?;
                let property = self.property(&property.2);
                Box::new(move |f| {
                    let value = value(f)?;
                    let env = f.env;
                    let (target, mut sizes) = f.local_sized(slot);
                    let value = match op {
                        None => value,
                        Some(op) => {
                            ops::binary(op, ops::get_property(target, &property, env)?, value, env)?
                        }
                    };
                    ops::set_property(target, &property, value, &mut sizes, env)?;
                    if let Some(sizes) = sizes {
                        f.keep_sizes(slot, sizes);
                    }
                    Ok(Dynamic::UNIT)
                })
            }
            Expr::Index(chain, flags, _) if *flags == ASTFlags::BREAK => {
                let slot = target_local(self, &chain.lhs)?;
                let index = self.expr(&chain.rhs)?;
                Box::new(move |f| {
                    let value = value(f)?;
                    let index = index(f)?;
                    let env = f.env;
                    let (target, mut sizes) = f.local_sized(slot);
                    let value = match op {
                        None => value,
                        Some(op) => {
                            ops::binary(op, ops::get_index(target, &index, env)?, value, env)?
                        }
                    };
                    ops::set_index(target, &index, value, &mut sizes, env)?;
                    if let Some(sizes) = sizes {
                        f.keep_sizes(slot, sizes);
                    }
                    Ok(Dynamic::UNIT)
                })
            }
            _ => return refuse(lhs.position(), "an assignment to this kind of target"),
        })
    }

    fn exprs(&mut self, exprs: &[Expr]) -> Compiled<Vec<Code>> {
        exprs.iter().map(|e| self.expr(e)).collect()
    }

    fn expr(&mut self, expr: &Expr) -> Compiled<Code> {
        self.nodes += 1;
        Ok(match expr {
            Expr::DynamicConstant(value, _) => {
                let value = (**value).clone();
                Box::new(move |_| Ok(value.clone()))
            }
            Expr::BoolConstant(value, _) => {
                let value = *value;
                Box::new(move |_| Ok(Dynamic::from_bool(value)))
            }
            Expr::IntegerConstant(value, _) => {
                let value = *value;
                Box::new(move |_| Ok(Dynamic::from_int(value)))
            }
            Expr::FloatConstant(value, _) => {
                let value = **value;
                Box::new(move |_| Ok(Dynamic::from_float(value)))
            }
            Expr::CharConstant(value, _) => {
                let value = *value;
                Box::new(move |_| Ok(Dynamic::from_char(value)))
            }
            Expr::StringConstant(value, _) => {
                let value = value.clone();
                Box::new(move |_| Ok(value.clone().into()))
            }
            Expr::Unit(_) => unit(),
            Expr::InterpolatedString(parts, _) => {
                let parts = self.exprs(parts)?;
                Box::new(move |f| {
                    let mut text = String::new();
                    for part in &parts {
                        ops::append_text(&mut text, &part(f)?)?;
                    }
                    if text.len() > f.env.limits.string_bytes_max {
                        return Err(Stop::Fallback);
                    }
                    Ok(ImmutableString::from(text).into())
                })
            }
            Expr::Array(items, _) => {
                let items = self.exprs(items)?;
                Box::new(move |f| {
                    let mut array = Vec::with_capacity(items.len());
                    for item in &items {
                        array.push(item(f)?);
                    }
                    let array = Dynamic::from_array(array);
                    ops::fits(&array, f.env)?;
                    Ok(array)
                })
            }
            Expr::Map(map, _) => {
                let (entries, template) = &**map;
                let template: Map = template.clone();
                let keys: Vec<ImmutableString> =
                    entries.iter().map(|(k, _)| k.name.clone()).collect();
                let values = entries
                    .iter()
                    .map(|(_, v)| self.expr(v))
                    .collect::<Compiled<Vec<Code>>>()?;
                Box::new(move |f| {
                    let mut evaluated = Vec::with_capacity(values.len());
                    for value in &values {
                        evaluated.push(value(f)?);
                    }
                    let map = ops::fill_map(template.clone(), &keys, evaluated);
                    ops::fits(&map, f.env)?;
                    Ok(map)
                })
            }
            Expr::Variable(variable, ..) => {
                let name = &variable.1;
                if let Some((slot, _)) = self.local(name) {
                    Box::new(move |f| Ok(f.local_ref(slot).clone()))
                } else if let Some(id) = self.schema.table_id(name) {
                    let table = Dynamic::from(Table { id });
                    Box::new(move |_| Ok(table.clone()))
                } else {
                    return refuse(expr.position(), format!("the variable {name}"));
                }
            }
            Expr::Stmt(block) => self.block(block.statements())?,
            Expr::FnCall(call, at) => self.call(call, *at)?,
            Expr::And(operands, _) | Expr::Or(operands, _) => {
                let all = matches!(expr, Expr::And(..));
                let operands = self.exprs(operands)?;
                Box::new(move |f| {
                    for operand in &operands {
                        if ops::truth(&operand(f)?)? != all {
                            return Ok(Dynamic::from_bool(!all));
                        }
                    }
                    Ok(Dynamic::from_bool(all))
                })
            }
            Expr::Coalesce(operands, _) => {
                let mut operands = self.exprs(operands)?;
                let Some(last) = operands.pop() else {
                    return refuse(expr.position(), "an empty ??");
                };
                Box::new(move |f| {
                    for operand in &operands {
                        let value = operand(f)?;
                        if !value.is_unit() {
                            return Ok(value);
                        }
                    }
                    last(f)
                })
            }
            Expr::Dot(..) | Expr::Index(..) => self.chain(expr)?,
            Expr::ThisPtr(at) => return refuse(*at, "this"),
            Expr::Property(..) | Expr::MethodCall(..) => {
                return refuse(expr.position(), "a property or method outside a chain")
            }
            _ => return refuse(expr.position(), "this kind of expression"),
        })
    }

    fn call(&mut self, call: &FnCallExpr, at: Position) -> Compiled<Code> {
        if call.capture_parent_scope {
            return refuse(at, format!("the call {}!()", call.name));
        }
        let name = call.name.as_str();
        let mut args = self.exprs(&call.args)?;
        if call.op_token.is_some() {
            match (name, args.len()) {
                (_, 2) => {
                    let Some(op) = BinOp::from_name(name) else {
                        return refuse(at, format!("the operator {name}"));
                    };
                    let y = args.pop().expect("two operands");
                    let x = args.pop().expect("two operands");
                    return Ok(Box::new(move |f| {
                        let (x, y) = (x(f)?, y(f)?);
                        ops::binary(op, x, y, f.env)
                    }));
                }
                ("-", 1) => {
                    let x = args.pop().expect("one operand");
                    return Ok(Box::new(move |f| ops::negate(x(f)?)));
                }
                ("!", 1) => {
                    let x = args.pop().expect("one operand");
                    return Ok(Box::new(move |f| ops::not(x(f)?)));
                }
                _ => return refuse(at, format!("the operator {name}")),
            }
        }
        if let Some(&function) = self.index.get(&(call.name.clone(), args.len())) {
            self.callees.push(function);
            return Ok(Box::new(move |f| {
                let mut values = Vec::with_capacity(args.len());
                for arg in &args {
                    values.push(arg(f)?);
                }
                f.call(function, values)
            }));
        }
        if self.script_names.contains(name) {
            return refuse(at, format!("{name}() with a different number of arguments"));
        }
        match (name, args.len()) {
            ("type_of", 1) => {
                let x = args.pop().expect("one argument");
                Ok(Box::new(move |f| Ok(ops::type_of(&x(f)?, f.env))))
            }
            ("parse_int", 1) => {
                let x = args.pop().expect("one argument");
                Ok(Box::new(move |f| ops::parse_int(&x(f)?)))
            }
            ("print", 1) | ("warn", 1) | ("error", 1) => {
                let level = match name {
                    "print" => crate::script::world::Level::Info,
                    "warn" => crate::script::world::Level::Warn,
                    _ => crate::script::world::Level::Error,
                };
                let x = args.pop().expect("one argument");
                Ok(Box::new(move |f| {
                    let x = x(f)?;
                    // Strings and integers print as themselves; other values as Rhai's
                    // `to_string` decides.
                    if let Ok(s) = x.as_immutable_string_ref() {
                        crate::script::world::log(level, &s);
                    } else if let Ok(i) = x.as_int() {
                        crate::script::world::log(level, &i.to_string());
                    } else {
                        return Err(Stop::Fallback);
                    }
                    Ok(Dynamic::UNIT)
                }))
            }
            ("checked_add", 2) | ("checked_sub", 2) | ("checked_mul", 2) => {
                let op: fn(i64, i64) -> Option<i64> = match name {
                    "checked_add" => i64::checked_add,
                    "checked_sub" => i64::checked_sub,
                    _ => i64::checked_mul,
                };
                let b = args.pop().expect("two arguments");
                let a = args.pop().expect("two arguments");
                Ok(Box::new(move |f| {
                    let a = a(f)?.as_int().map_err(|_| Stop::Fallback)?;
                    let b = b(f)?.as_int().map_err(|_| Stop::Fallback)?;
                    Ok(crate::script::arith::checked(op(a, b)))
                }))
            }
            ("now", 0) => Ok(Box::new(|_| {
                crate::script::world::now()
                    .map(Dynamic::from_int)
                    .map_err(|_| Stop::Fallback)
            })),
            ("uuid", 0) => Ok(Box::new(|_| {
                crate::script::world::uuid()
                    .map(|id| Dynamic::from(ImmutableString::from(id)))
                    .map_err(|_| Stop::Fallback)
            })),
            ("random", 2) => {
                let hi = args.pop().expect("two arguments");
                let lo = args.pop().expect("two arguments");
                Ok(Box::new(move |f| {
                    let lo = lo(f)?.as_int().map_err(|_| Stop::Fallback)?;
                    let hi = hi(f)?.as_int().map_err(|_| Stop::Fallback)?;
                    crate::script::world::random(lo, hi)
                        .map(Dynamic::from_int)
                        .map_err(|_| Stop::Fallback)
                }))
            }
            ("respond", 2) => {
                let body = args.pop().expect("two arguments");
                let status = args.pop().expect("two arguments");
                Ok(Box::new(move |f| {
                    let status = status(f)?;
                    ops::respond(&status, body(f)?, None)
                }))
            }
            ("respond", 3) => {
                let headers = args.pop().expect("three arguments");
                let body = args.pop().expect("three arguments");
                let status = args.pop().expect("three arguments");
                Ok(Box::new(move |f| {
                    let status = status(f)?;
                    let body = body(f)?;
                    ops::respond(&status, body, Some(&headers(f)?))
                }))
            }
            _ => refuse(at, format!("the function {name}()")),
        }
    }

    /// `root.a[i].m(x)...`: its arguments are evaluated first, in order, then the chain is walked
    /// from the root (in place when the root is a local), as Rhai does.
    fn chain(&mut self, expr: &Expr) -> Compiled<Code> {
        let mut steps = Vec::new();
        let mut args = Vec::new();
        let root = match expr {
            Expr::Dot(chain, flags, _) if flags.is_empty() => {
                self.dot_steps(&chain.rhs, &mut steps, &mut args)?;
                &chain.lhs
            }
            Expr::Index(chain, flags, _) if !flags.contains(ASTFlags::NEGATED) => {
                self.index_steps(&chain.rhs, *flags, &mut steps, &mut args)?;
                &chain.lhs
            }
            Expr::Index(..) => return refuse(expr.position(), "the optional index ?["),
            _ => return refuse(expr.position(), "the optional chain ?."),
        };
        let root = match root {
            Expr::Variable(variable, ..) => match self.local(&variable.1) {
                Some((slot, constant)) => Root::Local { slot, constant },
                None => match (self.schema.table_id(&variable.1), steps.as_slice()) {
                    (Some(id), [Step::Method(..), ..]) => Root::Table(Table { id }),
                    (Some(id), [Step::Property(p), Step::Method(..), ..]) => {
                        match self.index_of(id, &p.name) {
                            Some(index) => {
                                steps.remove(0);
                                Root::Index(index)
                            }
                            None => Root::Value(self.expr(root)?),
                        }
                    }
                    _ => Root::Value(self.expr(root)?),
                },
            },
            other => Root::Value(self.expr(other)?),
        };
        // `find` is an index's alone: on anything else it would fall back on every call.
        let first_is_index = matches!(root, Root::Index(_));
        for (at, step) in steps.iter().enumerate() {
            if let Step::Method(Method::Find | Method::FindRev, _) = step {
                if !(first_is_index && at == 0) {
                    return refuse(
                        expr.position(),
                        "the method find() on something other than an index",
                    );
                }
            }
        }
        // Of the methods the compiled path calls, only `push` changes what a value holds as the
        // size limits count it (`save` changes a row, which counts as nothing).
        let grows = steps
            .iter()
            .any(|s| matches!(s, Step::Method(Method::Push, _)));
        // `save` changes a row in place; no row is in the first parameter unless assigned there.
        let changes = steps
            .iter()
            .any(|s| matches!(s, Step::Method(Method::Push | Method::Save, _)));
        self.changes_first_parameter |= changes && matches!(root, Root::Local { slot: 0, .. });
        // `local.push(x)`: the local's sizes after are its sizes before and x's, and the check
        // of the local is the check of the array pushed into.
        let pushes_on_root = matches!(steps.as_slice(), [Step::Method(Method::Push, 1)]);
        // `local.len()`: Rhai checks the receiver against the size limits, which walks it; a
        // loop that asks an array it grows for its length would walk it at every turn.
        let len_on_root = matches!(steps.as_slice(), [Step::Method(Method::Len, 0)]);
        Ok(Box::new(move |f| {
            let mut values = Vec::with_capacity(args.len());
            for arg in &args {
                values.push(arg(f)?);
            }
            let env = f.env;
            if let Root::Table(_) | Root::Index(_) = &root {
                let Some((Step::Method(method, count), rest)) = steps.split_first() else {
                    unreachable!("a table or index root starts with a method");
                };
                let later = values.split_off(*count);
                let mut result = match &root {
                    Root::Table(table) => ops::table_method(*method, *table, values, env)?,
                    Root::Index(index) => ops::index_method(*method, *index, values, env)?,
                    _ => unreachable!("a table or an index"),
                };
                return if rest.is_empty() {
                    Ok(result)
                } else {
                    walk(&mut result, rest, &mut later.into_iter(), false, env)
                };
            }
            let mut values = values.into_iter();
            match &root {
                Root::Local { slot, .. }
                    if len_on_root && {
                        let local = f.local_ref(*slot);
                        local.is_array() || local.is_map()
                    } =>
                {
                    // Known sizes were kept only after a check of them passed, and `len`
                    // changes nothing: the check is the comparison, not a walk.
                    let (target, known) = f.local_sized(*slot);
                    let sizes = ops::fits_known(target, known, env)?;
                    let length = match (target.as_array_ref(), target.as_map_ref()) {
                        (Ok(array), _) => array.len(),
                        (_, Ok(map)) => map.len(),
                        _ => unreachable!("an array or a map, as the guard says"),
                    };
                    f.keep_sizes(*slot, sizes);
                    Ok(Dynamic::from_int(length as i64))
                }
                Root::Local { slot, constant } if !grows => walk(
                    f.local_same_sizes(*slot),
                    &steps,
                    &mut values,
                    *constant,
                    env,
                ),
                Root::Local { slot, constant } if pushes_on_root => {
                    let (target, before) = f.local_sized(*slot);
                    let item = values.next().expect("one argument");
                    let known = before.map(|before| before.pushed(ops::Sizes::of(&item)));
                    ops::push(target, item, *constant)?;
                    let sizes = ops::fits_known(target, known, env)?;
                    f.keep_sizes(*slot, sizes);
                    Ok(Dynamic::UNIT)
                }
                Root::Local { slot, constant } => {
                    let value = walk(f.local(*slot), &steps, &mut values, *constant, env)?;
                    // A push inside the local grew the local as a whole.
                    ops::fits(f.local(*slot), env)?;
                    Ok(value)
                }
                Root::Value(code) => walk(&mut code(f)?, &steps, &mut values, false, env),
                Root::Table(_) | Root::Index(_) => unreachable!("called above"),
            }
        }))
    }

    fn dot_steps(
        &mut self,
        node: &Expr,
        steps: &mut Vec<Step>,
        args: &mut Vec<Code>,
    ) -> Compiled<()> {
        match node {
            Expr::Property(property, _) => {
                self.nodes += 1;
                steps.push(Step::Property(self.property(&property.2)));
            }
            Expr::MethodCall(call, at) => {
                self.nodes += 1;
                let name = call.name.as_str();
                if self.script_names.contains(name) {
                    return refuse(
                        *at,
                        format!("the method {name}(), which a script function redefines"),
                    );
                }
                let Some(method) = Method::from_name(name) else {
                    return refuse(*at, format!("the method {name}()"));
                };
                if !method.takes(call.args.len()) {
                    return refuse(
                        *at,
                        format!("the method {name}() with this number of arguments"),
                    );
                }
                args.extend(self.exprs(&call.args)?);
                steps.push(Step::Method(method, call.args.len()));
            }
            Expr::Dot(chain, flags, _) if flags.is_empty() => {
                self.dot_steps(&chain.lhs, steps, args)?;
                self.dot_steps(&chain.rhs, steps, args)?;
            }
            Expr::Index(chain, flags, _) if !flags.contains(ASTFlags::NEGATED) => {
                self.dot_steps(&chain.lhs, steps, args)?;
                self.index_steps(&chain.rhs, *flags, steps, args)?;
            }
            Expr::Dot(..) => return refuse(node.position(), "the optional chain ?."),
            Expr::Index(..) => return refuse(node.position(), "the optional index ?["),
            _ => return refuse(node.position(), "this kind of chain"),
        }
        Ok(())
    }

    fn index_steps(
        &mut self,
        node: &Expr,
        flags: ASTFlags,
        steps: &mut Vec<Step>,
        args: &mut Vec<Code>,
    ) -> Compiled<()> {
        if flags.contains(ASTFlags::BREAK) {
            args.push(self.expr(node)?);
            steps.push(Step::Index);
            return Ok(());
        }
        match node {
            Expr::Index(chain, flags, _) if !flags.contains(ASTFlags::NEGATED) => {
                args.push(self.expr(&chain.lhs)?);
                steps.push(Step::Index);
                self.index_steps(&chain.rhs, *flags, steps, args)
            }
            Expr::Dot(chain, flags, _) if flags.is_empty() => {
                args.push(self.expr(&chain.lhs)?);
                steps.push(Step::Index);
                self.dot_steps(&chain.rhs, steps, args)
            }
            Expr::Dot(..) => refuse(node.position(), "the optional chain ?."),
            Expr::Index(..) => refuse(node.position(), "the optional index ?["),
            _ => refuse(node.position(), "this kind of index chain"),
        }
    }
}

/// Applies `steps` to `target`. `is_copy`: the target is a value Rhai would write back (a row's
/// field, a constant), so a method that changes it goes to Rhai.
fn walk(
    target: &mut Dynamic,
    steps: &[Step],
    args: &mut std::vec::IntoIter<Dynamic>,
    is_copy: bool,
    env: &super::Env,
) -> Outcome {
    let Some((step, rest)) = steps.split_first() else {
        return Ok(target.clone());
    };
    match step {
        Step::Property(property) => {
            if rest.is_empty() {
                return ops::get_property(target, property, env);
            }
            if let Ok(mut map) = target.as_map_mut() {
                return match map.get_mut(property.name.as_str()) {
                    Some(value) => walk(value, rest, args, is_copy, env),
                    None => walk(&mut Dynamic::from(()), rest, args, true, env),
                };
            }
            walk(
                &mut ops::get_property(target, property, env)?,
                rest,
                args,
                true,
                env,
            )
        }
        Step::Index => {
            let index = args.next().expect("an index value per index step");
            if rest.is_empty() {
                return ops::get_index(target, &index, env);
            }
            if let Ok(mut array) = target.as_array_mut() {
                let at = index.as_int().map_err(|_| Stop::Fallback)?;
                let at = if at < 0 { array.len() as i64 + at } else { at };
                return match usize::try_from(at).ok().and_then(|at| array.get_mut(at)) {
                    Some(value) => walk(value, rest, args, is_copy, env),
                    None => Err(Stop::Fallback),
                };
            }
            if let Ok(mut map) = target.as_map_mut() {
                let name = index
                    .as_immutable_string_ref()
                    .map_err(|_| Stop::Fallback)?;
                return match map.get_mut(name.as_str()) {
                    Some(value) => walk(value, rest, args, is_copy, env),
                    None => walk(&mut Dynamic::from(()), rest, args, true, env),
                };
            }
            walk(
                &mut ops::get_index(target, &index, env)?,
                rest,
                args,
                true,
                env,
            )
        }
        Step::Method(method, count) => {
            let values: Vec<Dynamic> = args.by_ref().take(*count).collect();
            let mut result = ops::call_method(*method, target, values, is_copy, env)?;
            if rest.is_empty() {
                Ok(result)
            } else {
                walk(&mut result, rest, args, false, env)
            }
        }
    }
}
