//! Statements: the kinds of statement, `for` loops and assignments.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rhai::{ASTFlags, BinaryExpr, Dynamic, Expr, Stmt};

use super::*;
use crate::rhai_ast::compiled::answer::AnswerList;
use crate::rhai_ast::compiled::ops::{self, BinOp};
use crate::rhai_ast::compiled::{Code, Frame, Stop};
use crate::script::api::{self, Row, Table};

impl Compiler<'_> {
    pub(super) fn stmt_body(&mut self, stmt: &Stmt) -> Compiled<Code> {
        // Only the function's last statement itself: not the statements inside it.
        let tail = std::mem::take(&mut self.tail);
        Ok(match stmt {
            Stmt::Noop(_) => unit(),
            Stmt::Expr(expr) if tail && self.is_handler && matches!(**expr, Expr::Map(..)) => {
                self.answer_literal(expr)?
            }
            Stmt::Expr(expr) => self.expr(expr)?,
            Stmt::FnCall(call, at) => self.call(call, *at)?,
            Stmt::Block(block) => self.block(block.statements())?,
            Stmt::Var(var, flags, _) => {
                let (ident, value, _) = &**var;
                let constant = flags.contains(ASTFlags::CONSTANT);
                // `[]`, which Rhai's optimizer may have made a constant.
                let empty_array = match value {
                    Expr::Array(items, _) => items.is_empty(),
                    Expr::DynamicConstant(value, _) => {
                        value.as_array_ref().is_ok_and(|items| items.is_empty())
                    }
                    _ => false,
                };
                // Resolved before the new local hides an outer one of its name.
                let pure = self.pure_int(value);
                let value_expr = value;
                let value = self.expr(value)?;
                let get = self.row_get(value_expr)?;
                let slot = self.declare(ident.name.clone(), constant);
                if empty_array && !constant && self.is_handler {
                    // Perhaps an answer's list: known once the whole function is compiled.
                    let list = Arc::new(AtomicBool::new(true));
                    self.lists.insert(slot, list.clone());
                    return Ok(Box::new(move |f| {
                        let value = if list.load(Ordering::Relaxed) && f.depth == 1 {
                            Dynamic::from(AnswerList::new())
                        } else {
                            value(f)?
                        };
                        ops::put(f.local(slot), value);
                        Ok(Dynamic::UNIT)
                    }));
                }
                match get {
                    Some((table, parts)) => get_into_local(slot, table, parts, value),
                    None => set_local(slot, pure, value),
                }
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
                let test = self.test(&flow.expr);
                let condition = self.expr(&flow.expr)?;
                let body = self.block(flow.body.statements())?;
                let branch = self.block(flow.branch.statements())?;
                Box::new(move |f| {
                    let truth = match test.as_ref().and_then(|test| test(f)) {
                        Some(truth) => truth,
                        None => ops::truth(&condition(f)?)?,
                    };
                    if truth {
                        body(f)
                    } else {
                        branch(f)
                    }
                })
            }
            Stmt::While(flow, _) => {
                let before = self.nodes;
                self.loops += 1;
                let condition = match &flow.expr {
                    Expr::Unit(_) => None,
                    expr => Some(self.expr(expr)?),
                };
                let turn = CHARGE_PER_NODE * (self.nodes - before) + 2;
                let body = self.block(flow.body.statements())?;
                self.loops -= 1;
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
                self.loops += 1;
                let body = self.block(flow.body.statements())?;
                let before = self.nodes;
                let condition = self.expr(&flow.expr)?;
                self.loops -= 1;
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
                    Some(value)
                        if self.is_handler
                            && !flags.contains(ASTFlags::BREAK)
                            && matches!(**value, Expr::Map(..)) =>
                    {
                        self.answer_literal(value)?
                    }
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

    pub(super) fn for_loop(
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
        self.loops += 1;
        let slot = self.declare(variable.name.clone(), false);
        let counter = counter.map(|c| self.declare(c.name.clone(), false));
        let body = self.block(flow.body.statements())?;
        self.loops -= 1;
        self.scope.truncate(mark);

        // One turn of the loop; Ok(false) ends it.
        let turn = move |f: &mut Frame, n: usize, value: Dynamic| -> Result<bool, Stop> {
            f.tick(2)?;
            ops::put(f.local(slot), value);
            if let Some(counter) = counter {
                ops::put(f.local(counter), Dynamic::from_int(n as i64));
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

    /// The slot of the local an assignment changes (not a constant).
    fn target_local(&mut self, expr: &Expr) -> Compiled<usize> {
        match expr {
            Expr::Variable(variable, ..) => match self.local(&variable.1) {
                Some((slot, false)) => {
                    self.changes_first_parameter |= slot == 0;
                    Ok(slot)
                }
                _ => refuse(expr.position(), format!("an assignment to {}", variable.1)),
            },
            _ => refuse(expr.position(), "an assignment to an expression"),
        }
    }

    /// `x op= y` to a local or to a property of a local, with integers kept out of `Dynamic`s
    /// (`sum += amount`, `row.s_ytd += quantity`).
    fn op_assignment(&mut self, op: BinOp, lhs: &Expr, rhs: &Expr) -> Compiled<Code> {
        let value = self.int_operand(rhs)?;
        Ok(match lhs {
            Expr::Variable(..) => {
                let slot = self.target_local(lhs)?;
                Box::new(move |f| {
                    let value = value.eval(f)?;
                    let env = f.env;
                    let target = f.local(slot);
                    if let (Ok(a), Ok(b)) = (target.as_int(), &value) {
                        let result = ops::int_binary(op, a, *b)?;
                        // The integer it replaces owns nothing to drop.
                        std::mem::forget(std::mem::replace(target, ops::from_int_or(result)));
                    } else {
                        let current = std::mem::take(target);
                        *f.local(slot) = ops::binary(op, current, ops::from_int_or(value), env)?;
                    }
                    Ok(Dynamic::UNIT)
                })
            }
            Expr::Dot(chain, _, _) => {
                let Expr::Property(property, _) = &chain.rhs else {
                    return refuse(lhs.position(), "an assignment through a longer chain");
                };
                let slot = self.target_local(&chain.lhs)?;
                let property = self.property(&property.2);
                let is_key = property.is_key;
                Box::new(move |f| {
                    let value = value.eval(f)?;
                    let env = f.env;
                    let (target, mut sizes) = f.local_sized(slot);
                    // A row's integer field and an integer: read, computed and set in place,
                    // as the general way below does it with the row looked up twice.
                    if let (false, Ok(b), Some(mut row)) =
                        (is_key, &value, target.write_lock::<Row>())
                    {
                        let field = property.slots.get(row.table as usize).copied().flatten();
                        if let Some((field, a)) = field.and_then(|s| Some((s, row.int(s)?))) {
                            let result = ops::from_int_or(ops::int_binary(op, a, *b)?);
                            api::check_field(env.schema, row.table, field, &result)
                                .map_err(|_| Stop::Fallback)?;
                            row.set(field, result);
                            drop(row);
                            if let Some(sizes) = sizes {
                                f.keep_sizes(slot, sizes);
                            }
                            return Ok(Dynamic::UNIT);
                        }
                    }
                    let (target, _) = f.local_sized(slot);
                    let current = match (is_key, &value) {
                        (false, Ok(_)) => ops::row_int(target, &property).map(Ok),
                        _ => None,
                    };
                    let current = match current {
                        Some(current) => current,
                        None => ops::int_or(ops::get_property(target, &property, env)?),
                    };
                    let value = ops::from_int_or(ops::binary_int_or(op, current, value, env)?);
                    ops::set_property(target, &property, value, &mut sizes, env)?;
                    if let Some(sizes) = sizes {
                        f.keep_sizes(slot, sizes);
                    }
                    Ok(Dynamic::UNIT)
                })
            }
            _ => unreachable!("only locals and their properties come here"),
        })
    }

    pub(super) fn assignment(
        &mut self,
        op: Option<BinOp>,
        lhs: &Expr,
        rhs: &Expr,
    ) -> Compiled<Code> {
        if let (Some(op), Expr::Variable(..) | Expr::Dot(..)) = (op, lhs) {
            if !matches!(lhs, Expr::Dot(_, flags, _) if !flags.is_empty()) {
                return self.op_assignment(op, lhs, rhs);
            }
        }
        let pure = self.pure_int(rhs);
        let value = self.expr(rhs)?;
        let get = self.row_get(rhs)?;
        Ok(match lhs {
            // (`x op= y` to a local or its property went to `op_assignment` above.)
            Expr::Variable(..) => {
                let slot = self.target_local(lhs)?;
                match get {
                    Some((table, parts)) => get_into_local(slot, table, parts, value),
                    None => set_local(slot, pure, value),
                }
            }
            Expr::Dot(chain, flags, _) if flags.is_empty() => {
                let Expr::Property(property, _) = &chain.rhs else {
                    return refuse(lhs.position(), "an assignment through a longer chain");
                };
                let slot = self.target_local(&chain.lhs)?;
                let property = self.property(&property.2);
                Box::new(move |f| {
                    let value = value(f)?;
                    let env = f.env;
                    let (target, mut sizes) = f.local_sized(slot);
                    ops::set_property(target, &property, value, &mut sizes, env)?;
                    if let Some(sizes) = sizes {
                        f.keep_sizes(slot, sizes);
                    }
                    Ok(Dynamic::UNIT)
                })
            }
            Expr::Index(chain, flags, _) if *flags == ASTFlags::BREAK => {
                // Compiled in the order they run, the target last: a read of the target in the
                // index is then not its last use.
                let index = self.expr(&chain.rhs)?;
                let slot = self.target_local(&chain.lhs)?;
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
}

/// `slot = value`: an integer expression's [`Pure`] form, when it has one, computes it with no
/// `Dynamic` between its steps; the general code decides whenever that answers nothing.
fn set_local(slot: usize, pure: Option<Pure>, value: Code) -> Code {
    match pure {
        Some(pure) => {
            let pure = pure.fuse();
            Box::new(move |f| {
                let value = match pure(f) {
                    Some(i) => Dynamic::from_int(i),
                    None => value(f)?,
                };
                ops::put(f.local(slot), value);
                Ok(Dynamic::UNIT)
            })
        }
        None => Box::new(move |f| {
            let value = value(f)?;
            ops::put(f.local(slot), value);
            Ok(Dynamic::UNIT)
        }),
    }
}

/// `local = table.get(a, b)` with integer parts: the row read into the row the local holds, in
/// place (a row in a `Dynamic` is two allocations, which a loop of reads would make and free
/// each turn). Parts that are not integers go the general way, which evaluates them again:
/// they are pieces, which change nothing.
fn get_into_local(slot: usize, table: Table, parts: Vec<IntExpr>, general: Code) -> Code {
    Box::new(move |f| {
        let Some(key) = super::expressions::int_key(&parts, f)? else {
            let value = general(f)?;
            ops::put(f.local(slot), value);
            return Ok(Dynamic::UNIT);
        };
        let fields = crate::script::context::get_row(table.id, &key).map_err(|_| Stop::Fallback)?;
        let local = f.local(slot);
        let Some(fields) = fields else {
            ops::put(local, Dynamic::UNIT);
            return Ok(Dynamic::UNIT);
        };
        let row = Row::new(table.id, key, fields);
        if local.is::<Row>() {
            *local.write_lock::<Row>().expect("a row, as just checked") = row;
        } else {
            ops::put(local, Dynamic::from(row));
        }
        Ok(Dynamic::UNIT)
    })
}
