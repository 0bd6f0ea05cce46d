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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rhai::{Dynamic, ImmutableString, Position, Stmt, AST};

mod chains;
mod expressions;
mod statements;

use super::ops::{self, Method, Property};
use super::pure::{self, Comparison, IntExpr, Pure, TestCode};
use super::{Code, Function, IntCode, Outcome, Program, Stop};
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
    let mut bodies: Vec<Compiled<Vec<Statement>>> = Vec::new();
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
            loops: 0,
            last_reads: HashMap::new(),
            is_handler: definition.params.len() == 1
                && handlers
                    .iter()
                    .any(|h| h.as_str() == definition.name.as_str()),
            tail: false,
            lists: HashMap::new(),
        };
        let alone =
            crate::rhai_ast::checks::function_alone(ast, &definition.name, definition.params.len());
        if alone.iter_fn_def().count() != 1 {
            bodies.push(refuse(
                Position::NONE,
                format!("a second fn {}() with the same parameters", definition.name),
            ));
            compilers.push(compiler);
            continue;
        }
        let statements = crate::rhai_ast::checks::statements(&alone);
        let last = statements.len().saturating_sub(1);
        let body = statements
            .iter()
            .enumerate()
            .map(|(n, stmt)| {
                compiler.tail = n == last;
                compiler.stmt(stmt)
            })
            .collect::<Compiled<Vec<Statement>>>();
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
    /// The loops around its declaration (see `Compiler::loops`).
    loops: usize,
}

impl Local {
    fn new(name: ImmutableString) -> Local {
        Local {
            name,
            constant: false,
            loops: 0,
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
    /// Loops (`while`, `loop`, `do`, `for`) around the code being compiled.
    loops: usize,
    /// By slot: the last read of that local compiled so far, while it may be the local's last
    /// use (see `Compiler::read_local`).
    last_reads: HashMap<usize, Arc<AtomicBool>>,
    /// The function is a handler: its answer may be written as it runs (`super::answer`).
    is_handler: bool,
    /// The statement being compiled is the function's last, at its top level: its value is
    /// the function's.
    tail: bool,
    /// By slot: locals that start as `[]`, with whether every use so far is one an
    /// `answer::AnswerList` supports (a push of a map literal, a value of the answer).
    lists: HashMap<usize, Arc<AtomicBool>>,
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
/// A compiled statement, with what it is charged and where it is (see [`Compiler::stmt`]).
struct Statement {
    code: Code,
    weight: u64,
    at: Position,
}

/// Statements run in order, the value of the last one the block's. The block is charged its
/// statements' weights together when it starts: a statement that leaves the block early has
/// been charged for those after it, which only sends a handler near the limit to Rhai early
/// (see [`Compiler::stmt`]). A stop leaving a statement is placed at it.
fn sequence(mut statements: Vec<Statement>) -> Code {
    let weight: u64 = statements.iter().map(|s| s.weight).sum();
    let Some(last) = statements.pop() else {
        return unit();
    };
    let first_at = statements.first().map_or(last.at, |s| s.at);
    let Statement {
        code: last,
        at: last_at,
        ..
    } = last;
    if statements.is_empty() {
        return Box::new(move |f| {
            f.tick(weight).map_err(|stop| stop.leaving(first_at))?;
            last(f).map_err(|stop| stop.leaving(last_at))
        });
    }
    Box::new(move |f| {
        f.tick(weight).map_err(|stop| stop.leaving(first_at))?;
        for statement in &statements {
            // Most statements' value is `()`: nothing to drop, so no call to drop it.
            ops::discard((statement.code)(f).map_err(|stop| stop.leaving(statement.at))?);
        }
        last(f).map_err(|stop| stop.leaving(last_at))
    })
}

fn unit() -> Code {
    Box::new(|_| Ok(Dynamic::UNIT))
}

impl Compiler<'_> {
    /// The slot of the local `name`, and whether it is a constant. Every use of a local is
    /// resolved here, so that a read compiled earlier knows it was not the last.
    fn local(&mut self, name: &str) -> Option<(usize, bool)> {
        let slot = self.local_for_list(name)?;
        if let Some(list) = self.lists.get(&slot) {
            list.store(false, Ordering::Relaxed);
        }
        Some((slot, self.scope[slot].constant))
    }

    /// [`Compiler::local`] for a use that an answer's list supports: it is a use all the same
    /// for the local's last read.
    fn local_for_list(&mut self, name: &str) -> Option<usize> {
        let slot = self.scope.iter().rposition(|l| l.name == name)?;
        if let Some(read) = self.last_reads.remove(&slot) {
            read.store(false, Ordering::Relaxed);
        }
        Some(slot)
    }

    /// The slot of `name` if it is a local that may be an answer's list.
    fn list_slot(&self, name: &str) -> Option<usize> {
        self.slot_of(name)
            .filter(|slot| self.lists.contains_key(slot))
    }

    /// The slot of the local `name`, looked up without counting as a use of it (see
    /// [`Compiler::local`]).
    fn slot_of(&self, name: &str) -> Option<usize> {
        self.scope.iter().rposition(|l| l.name == name)
    }

    fn declare(&mut self, name: ImmutableString, constant: bool) -> usize {
        let loops = self.loops;
        self.scope.push(Local {
            name,
            constant,
            loops,
        });
        self.slots = self.slots.max(self.scope.len());
        let slot = self.scope.len() - 1;
        // A local that had this slot before is out of scope: its last read stays its last.
        self.last_reads.remove(&slot);
        self.lists.remove(&slot);
        slot
    }

    /// Code that reads the local in `slot` (just resolved by [`Compiler::local`]): a copy, or
    /// the value itself when this read turns out to be the local's last use, known once the
    /// whole function is compiled. A local is never read again after its last use: no later
    /// code names it, and no loop around the read was entered after its declaration (a loop
    /// would come back to it). The first parameter is always copied: a caller may lend it
    /// (see `Function::keeps_first_parameter`).
    fn read_local(&mut self, slot: usize) -> Code {
        if slot == 0 || self.scope[slot].loops != self.loops {
            return Box::new(move |f| Ok(f.local_ref(slot).clone()));
        }
        let last = Arc::new(AtomicBool::new(true));
        self.last_reads.insert(slot, last.clone());
        Box::new(move |f| {
            Ok(if last.load(Ordering::Relaxed) {
                std::mem::take(f.local(slot))
            } else {
                f.local_ref(slot).clone()
            })
        })
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
            is_key: name == "key",
            slots,
        }
    }

    fn block(&mut self, statements: &[Stmt]) -> Compiled<Code> {
        let mark = self.scope.len();
        let codes = statements
            .iter()
            .map(|s| self.stmt(s))
            .collect::<Compiled<Vec<Statement>>>()?;
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
    fn stmt(&mut self, stmt: &Stmt) -> Compiled<Statement> {
        let before = self.nodes;
        let code = self.stmt_body(stmt)?;
        let weight = CHARGE_PER_NODE * (self.nodes - before) + 2;
        Ok(Statement {
            code,
            weight,
            at: stmt.position(),
        })
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
            // A row's string field searched where it lies (TPC-C's New-Order asks two a line).
            if let [Step::Method(ops::Method::Contains, 1)] = rest {
                if let Some(needle) = args.as_slice().first() {
                    if let Some(found) = ops::field_contains(target, property, needle, env) {
                        args.next();
                        return found;
                    }
                }
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
