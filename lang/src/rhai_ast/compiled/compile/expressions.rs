//! Expressions: literals, operators, and calls of script functions and of Rhai's and Pure's
//! functions.

use rhai::{ASTFlags, Dynamic, Expr, FnCallExpr, ImmutableString, Map, Position, Stmt};

use super::*;
use crate::rhai_ast::compiled::answer::{self, AnswerList, LiteralKeys, Piece};
use crate::rhai_ast::compiled::ops::{self, BinOp};
use crate::rhai_ast::compiled::Frame;
use crate::rhai_ast::compiled::{Code, Stop};
use crate::script::api::Table;

impl Compiler<'_> {
    pub(super) fn exprs(&mut self, exprs: &[Expr]) -> Compiled<Vec<Code>> {
        exprs.iter().map(|e| self.expr(e)).collect()
    }

    pub(super) fn expr(&mut self, expr: &Expr) -> Compiled<Code> {
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
                let order = Self::literal_order(entries, &template);
                // The values that are locals: one whose sizes are known (an array built by
                // `push`, as an answer's list of lines is) is not walked again.
                let locals: Vec<Option<usize>> = entries
                    .iter()
                    .map(|(_, v)| match v {
                        Expr::Variable(variable, ..) => self.slot_of(&variable.1),
                        _ => None,
                    })
                    .collect();
                Box::new(move |f| {
                    let mut evaluated = Vec::with_capacity(values.len());
                    let mut sizes = ops::Sizes::default();
                    for (value, local) in values.iter().zip(&locals) {
                        // Read before the value: its last read takes it, and its sizes with it.
                        let known = local.and_then(|slot| f.known_sizes(slot));
                        let value = value(f)?;
                        sizes = sizes.plus(known.unwrap_or_else(|| ops::Sizes::of(&value)));
                        evaluated.push(value);
                    }
                    let map = match &order {
                        Some(order) => {
                            let map = ops::place_map(template.clone(), order, evaluated);
                            #[cfg(debug_assertions)]
                            {
                                let walked = ops::Sizes::of(&map);
                                let counted = ops::Sizes::map_of(order.len(), sizes);
                                assert!(
                                    walked == counted || walked == ops::Sizes::TOO_DEEP,
                                    "a literal's sizes are its parts': {counted:?}, {walked:?}"
                                );
                            }
                            ops::fits_known(
                                &map,
                                Some(ops::Sizes::map_of(order.len(), sizes)),
                                f.env,
                            )?;
                            map
                        }
                        // A key written twice: what its first value holds does not count.
                        None => {
                            let map = ops::fill_map(template.clone(), &keys, evaluated);
                            ops::fits(&map, f.env)?;
                            map
                        }
                    };
                    Ok(map)
                })
            }
            Expr::Variable(variable, ..) => {
                let name = &variable.1;
                if let Some((slot, _)) = self.local(name) {
                    self.read_local(slot)
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

    /// Where each of a map literal's values goes, in the map's order (the template holds each
    /// key once, in that order): the values go to their places with no search by name. `None`
    /// when the literal writes a key twice (the map then has fewer entries than the literal
    /// values).
    pub(super) fn literal_order(
        entries: &[(rhai::Ident, Expr)],
        template: &Map,
    ) -> Option<Vec<usize>> {
        (template.len() == entries.len()).then(|| {
            template
                .keys()
                .map(|name| {
                    entries
                        .iter()
                        .position(|(k, _)| k.name.as_str() == name.as_str())
                        .expect("the template holds the literal's keys")
                })
                .collect()
        })
    }

    /// [`Compiler::literal_order`], with the keys' text in that order.
    pub(super) fn literal_layout(
        entries: &[(rhai::Ident, Expr)],
        template: &Map,
    ) -> Option<(Vec<usize>, LiteralKeys)> {
        let order = Self::literal_order(entries, template)?;
        Some((order, LiteralKeys::new(template.keys().map(|k| k.as_str()))))
    }

    /// Whether `expr` can be an `answer::Piece` of a literal pushed into the local `list` (if
    /// any): a value that changes nothing and names no table, read only when written.
    pub(super) fn is_piece(&self, expr: &Expr, list: Option<usize>) -> bool {
        let local = |name: &str| self.slot_of(name).is_some_and(|slot| Some(slot) != list);
        match expr {
            Expr::IntegerConstant(..)
            | Expr::FloatConstant(..)
            | Expr::BoolConstant(..)
            | Expr::StringConstant(..)
            | Expr::CharConstant(..)
            | Expr::Unit(..) => true,
            Expr::Variable(variable, ..) => local(&variable.1),
            Expr::Dot(chain, flags, _) if flags.is_empty() => matches!(
                (&chain.lhs, &chain.rhs),
                (Expr::Variable(variable, ..), Expr::Property(..)) if local(&variable.1)
            ),
            Expr::FnCall(call, _) if !call.capture_parent_scope => {
                call.op_token.is_some()
                    && call.args.len() == 2
                    && BinOp::from_name(call.name.as_str()).is_some()
                    && call.args.iter().all(|arg| self.is_piece(arg, list))
            }
            _ => false,
        }
    }

    /// The values of a map literal as `answer::Piece`s, in the keys' `order`, when every one
    /// can be (see [`Compiler::is_piece`]); `list` is the local a push puts the literal into.
    /// Compiled beside the literal's ordinary code, which counts the operations: these count
    /// none. Locals an answer's list may be are read as such only for a return (`list` None).
    pub(super) fn pieces(
        &mut self,
        entries: &[(rhai::Ident, Expr)],
        order: &[usize],
        list: Option<usize>,
    ) -> Compiled<Option<Vec<Piece>>> {
        if !entries.iter().all(|(_, v)| self.is_piece(v, list)) {
            return Ok(None);
        }
        let nodes = self.nodes;
        let mut pieces = Vec::with_capacity(order.len());
        for &at in order {
            let value = &entries[at].1;
            pieces.push(match value {
                Expr::Variable(variable, ..) => match self.list_slot(&variable.1) {
                    Some(_) if list.is_none() => {
                        Piece::List(self.local_for_list(&variable.1).expect("a local"))
                    }
                    _ => Piece::Local(self.local(&variable.1).expect("a local").0),
                },
                Expr::Dot(chain, ..) => {
                    let (Expr::Variable(variable, ..), Expr::Property(property, _)) =
                        (&chain.lhs, &chain.rhs)
                    else {
                        unreachable!("a piece's chain is a local's property");
                    };
                    let slot = self.local(&variable.1).expect("a local").0;
                    Piece::Field(slot, self.property(&property.2))
                }
                value => Piece::Int(self.int_operand(value)?),
            });
        }
        self.nodes = nodes;
        Ok(Some(pieces))
    }

    /// A map literal in a handler's return position (see `answer`): the handler's answer
    /// written as it is made, when the handler runs as the handler; the map otherwise.
    pub(super) fn answer_literal(&mut self, expr: &Expr) -> Compiled<Code> {
        let Expr::Map(map, _) = expr else {
            unreachable!("called for a map literal");
        };
        let (entries, template) = &**map;
        let Some((order, keys)) = Self::literal_layout(entries, template) else {
            return self.expr(expr);
        };
        // Counted as `expr` counts a map literal: one node, and its values as expressions.
        self.nodes += 1;
        // A value that is an answer's list is taken as it is: its local is never read again.
        // A list given twice is an array (both values are the whole array).
        let mut lists = HashSet::new();
        for (_, v) in entries.iter() {
            if let Expr::Variable(variable, ..) = v {
                if let Some(slot) = self.list_slot(&variable.1) {
                    if !lists.insert(slot) {
                        self.lists[&slot].store(false, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            }
        }
        let values = entries
            .iter()
            .map(|(_, v)| match v {
                Expr::Variable(variable, ..) if self.list_slot(&variable.1).is_some() => {
                    self.nodes += 1;
                    let slot = self.local_for_list(&variable.1).expect("a local");
                    Ok((
                        Box::new(move |f: &mut Frame| {
                            let local = f.local_same_sizes(slot);
                            Ok(if local.is::<AnswerList>() {
                                std::mem::take(f.local(slot))
                            } else {
                                local.clone()
                            })
                        }) as Code,
                        Some(slot),
                    ))
                }
                Expr::Variable(variable, ..) => {
                    let slot = self.slot_of(&variable.1);
                    Ok((self.expr(v)?, slot))
                }
                v => Ok((self.expr(v)?, None)),
            })
            .collect::<Compiled<Vec<(Code, Option<usize>)>>>()?;
        let pieces = self.pieces(entries, &order, None)?;
        let template: Map = template.clone();
        Ok(Box::new(move |f| {
            if let (1, Some(pieces)) = (f.depth, &pieces) {
                return answer::written_pieces(&keys, pieces, f);
            }
            let mut evaluated = Vec::with_capacity(values.len());
            let mut sizes = ops::Sizes::default();
            for (value, local) in &values {
                let known = local.and_then(|slot| f.known_sizes(slot));
                let value = value(f)?;
                let counted = match value.read_lock::<AnswerList>() {
                    Some(list) => list.sizes(),
                    None => known.unwrap_or_else(|| ops::Sizes::of(&value)),
                };
                sizes = sizes.plus(counted);
                evaluated.push(value);
            }
            if f.depth == 1 {
                let ordered: Vec<Dynamic> = order
                    .iter()
                    .map(|&at| std::mem::take(&mut evaluated[at]))
                    .collect();
                return answer::written(&keys, &ordered, sizes, f.env);
            }
            let map = ops::place_map(template.clone(), &order, evaluated);
            ops::fits_known(&map, Some(ops::Sizes::map_of(order.len(), sizes)), f.env)?;
            Ok(map)
        }))
    }

    /// `table.get(parts).name` whose parts change nothing (`Compiler::is_piece`): when they are
    /// integers, the field is read from the stored row where it lies, with no row made (an
    /// integer as an `i64`). Anything else (a part not an integer, no such row) runs the
    /// general code, which evaluates the parts again: they change nothing. TPC-C's
    /// Stock-Level asks it of up to 200 stock rows.
    fn table_get_field(&mut self, expr: &Expr) -> Compiled<Option<IntCode>> {
        let Expr::Dot(chain, _, _) = expr else {
            return Ok(None);
        };
        let (Expr::Variable(variable, ..), Expr::Dot(rest, rest_flags, _)) =
            (&chain.lhs, &chain.rhs)
        else {
            return Ok(None);
        };
        let (Expr::MethodCall(call, _), Expr::Property(property, _)) = (&rest.lhs, &rest.rhs)
        else {
            return Ok(None);
        };
        if property.2 == "key" {
            return Ok(None);
        }
        let Some(id) = self.piece_get(&variable.1, call, rest_flags.is_empty()) else {
            return Ok(None);
        };
        // The general code counts the operations; the parts compiled again count none.
        let general = self.expr(expr)?;
        let parts = self.uncounted_parts(&call.args)?;
        let property = self.property(&property.2);
        let table = Table { id };
        Ok(Some(Box::new(move |f| {
            let Some(key) = int_key(&parts, f)? else {
                return Ok(ops::int_or(general(f)?));
            };
            match ops::stored_field(table, &key, &property, f.env)? {
                Some(value) => Ok(value),
                None => Ok(ops::int_or(general(f)?)),
            }
        })))
    }

    /// `x op y`, with integers kept out of `Dynamic`s from operand to result.
    fn binary(&mut self, op: BinOp, x: &Expr, y: &Expr) -> Compiled<IntCode> {
        // `x == ()` and `x != ()`, a handler's test for a row not found: as `ops::binary`
        // decides them (only unit equals unit), with `x` looked at in place, not copied.
        if let (BinOp::Eq | BinOp::Ne, Expr::Unit(_), operand)
        | (BinOp::Eq | BinOp::Ne, operand, Expr::Unit(_)) = (op, x, y)
        {
            let equal = op == BinOp::Eq;
            self.nodes += 1;
            if let Expr::Variable(variable, ..) = operand {
                if let Some((slot, _)) = self.local(&variable.1) {
                    self.nodes += 1;
                    return Ok(Box::new(move |f| {
                        Ok(Err(Dynamic::from_bool(
                            f.local_ref(slot).is_unit() == equal,
                        )))
                    }));
                }
            }
            let operand = self.expr(operand)?;
            return Ok(Box::new(move |f| {
                Ok(Err(Dynamic::from_bool(operand(f)?.is_unit() == equal)))
            }));
        }
        let x = self.int_operand(x)?;
        let y = self.int_operand(y)?;
        Ok(Box::new(move |f| {
            // In Rhai's order: `x` is read (an integer copied) before `y` runs.
            let x = x.eval(f)?;
            let y = y.eval(f)?;
            ops::binary_int_or(op, x, y, f.env)
        }))
    }

    /// An expression whose value is often an integer, compiled to hand an integer on as one:
    /// an integer literal, a local read in place, a row's field read from its packed slot, an
    /// operator on such operands. Any other expression is compiled as usual; any other value
    /// is handed on as it is.
    pub(super) fn int_operand(&mut self, expr: &Expr) -> Compiled<IntExpr> {
        // Resolved before the general code, which counts the uses of locals.
        let pure = self
            .pure_int(expr)
            .filter(Pure::is_compound)
            .map(Pure::fuse);
        let code = self.int_code(expr)?;
        Ok(IntExpr { pure, code })
    }

    /// The [`Pure`] form of `expr`, if it has one: its locals resolved without counting as
    /// uses (the general code compiled beside it counts them).
    pub(super) fn pure_int(&self, expr: &Expr) -> Option<Pure> {
        match expr {
            Expr::IntegerConstant(value, _) => Some(Pure::Const(*value)),
            Expr::Variable(variable, ..) => self.slot_of(&variable.1).map(Pure::Local),
            Expr::Dot(chain, flags, _) if flags.is_empty() => match (&chain.lhs, &chain.rhs) {
                (Expr::Variable(variable, ..), Expr::Property(property, _))
                    if property.2 != "key" =>
                {
                    let slot = self.slot_of(&variable.1)?;
                    Some(Pure::Field(slot, self.property(&property.2)))
                }
                _ => None,
            },
            Expr::Index(chain, flags, _)
                if flags.contains(ASTFlags::BREAK) && !flags.contains(ASTFlags::NEGATED) =>
            {
                let Expr::Variable(variable, ..) = &chain.lhs else {
                    return None;
                };
                let slot = self.slot_of(&variable.1)?;
                Some(Pure::Item(slot, Box::new(self.pure_int(&chain.rhs)?)))
            }
            Expr::FnCall(call, _) => self.pure_call(call),
            // `if test { x } else { y }` as a value.
            Expr::Stmt(block) => {
                let [Stmt::If(flow, _)] = block.statements() else {
                    return None;
                };
                let test = self.pure_comparison(&flow.expr)?;
                let branch = |statements: &[Stmt]| match statements {
                    [Stmt::Expr(expr)] => self.pure_int(expr),
                    [Stmt::FnCall(call, _)] => self.pure_call(call),
                    _ => None,
                };
                Some(Pure::Choice(
                    Box::new(test),
                    Box::new(branch(flow.body.statements())?),
                    Box::new(branch(flow.branch.statements())?),
                ))
            }
            _ => None,
        }
    }

    /// A condition decided with no `Dynamic` made, if `expr` is one: a [`Comparison`], or a
    /// local tested against `()` (a row not found). Resolved without counting uses of locals
    /// (the general code compiled beside it counts them).
    pub(super) fn test(&self, expr: &Expr) -> Option<TestCode> {
        if let Some(comparison) = self.pure_comparison(expr) {
            return Some(comparison.fuse());
        }
        let Expr::FnCall(call, _) = expr else {
            return None;
        };
        let (op @ (BinOp::Eq | BinOp::Ne), x, y) = operator(call)? else {
            return None;
        };
        let ((Expr::Variable(variable, ..), Expr::Unit(_))
        | (Expr::Unit(_), Expr::Variable(variable, ..))) = (x, y)
        else {
            return None;
        };
        let slot = self.slot_of(&variable.1)?;
        let equal = op == BinOp::Eq;
        Some(Box::new(move |f| {
            Some(f.local_ref(slot).is_unit() == equal)
        }))
    }

    /// [`Compiler::pure_int`] of an operator's call.
    fn pure_call(&self, call: &FnCallExpr) -> Option<Pure> {
        let (op, x, y) = operator(call)?;
        if !pure::is_arithmetic(op) {
            return None;
        }
        Some(Pure::Arithmetic(
            op,
            Box::new(self.pure_int(x)?),
            Box::new(self.pure_int(y)?),
        ))
    }

    /// `x op y` comparing two [`Pure`] integers, if `expr` is one.
    pub(super) fn pure_comparison(&self, expr: &Expr) -> Option<Comparison> {
        let Expr::FnCall(call, _) = expr else {
            return None;
        };
        let (op, x, y) = operator(call)?;
        if !pure::is_comparison(op) {
            return None;
        }
        Some(Comparison {
            op,
            x: self.pure_int(x)?,
            y: self.pure_int(y)?,
        })
    }

    /// [`Compiler::int_operand`]'s general code.
    fn int_code(&mut self, expr: &Expr) -> Compiled<IntCode> {
        match expr {
            Expr::IntegerConstant(value, _) => {
                self.nodes += 1;
                let value = *value;
                return Ok(Box::new(move |_| Ok(Ok(value))));
            }
            Expr::Variable(variable, ..) => {
                if let Some((slot, _)) = self.local(&variable.1) {
                    self.nodes += 1;
                    return Ok(Box::new(move |f| {
                        let value = f.local_ref(slot);
                        Ok(value.as_int().map_err(|_| value.clone()))
                    }));
                }
            }
            Expr::FnCall(call, _) if !call.capture_parent_scope => {
                if let (Some(_), [x, y], Some(op)) = (
                    &call.op_token,
                    &call.args[..],
                    BinOp::from_name(call.name.as_str()),
                ) {
                    self.nodes += 1;
                    return self.binary(op, x, y);
                }
            }
            Expr::Dot(chain, flags, _) if flags.is_empty() => {
                if let Some(code) = self.table_get_field(expr)? {
                    return Ok(code);
                }
                if let (Expr::Variable(variable, ..), Expr::Property(property, _)) =
                    (&chain.lhs, &chain.rhs)
                {
                    if let (Some((slot, _)), false) = (self.local(&variable.1), property.2 == "key")
                    {
                        let property = self.property(&property.2);
                        let code = self.expr(expr)?;
                        return Ok(Box::new(move |f| {
                            match ops::row_int(f.local_ref(slot), &property) {
                                Some(i) => Ok(Ok(i)),
                                None => Ok(ops::int_or(code(f)?)),
                            }
                        }));
                    }
                }
            }
            _ => {}
        }
        let code = self.expr(expr)?;
        Ok(Box::new(move |f| Ok(ops::int_or(code(f)?))))
    }

    pub(super) fn call(&mut self, call: &FnCallExpr, at: Position) -> Compiled<Code> {
        if call.capture_parent_scope {
            return refuse(at, format!("the call {}!()", call.name));
        }
        let name = call.name.as_str();
        if let (Some(_), [x, y]) = (&call.op_token, &call.args[..]) {
            let Some(op) = BinOp::from_name(name) else {
                return refuse(at, format!("the operator {name}"));
            };
            let code = self.binary(op, x, y)?;
            return Ok(Box::new(move |f| code(f).map(ops::from_int_or)));
        }
        let mut args = self.exprs(&call.args)?;
        if call.op_token.is_some() {
            match (name, args.len()) {
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
            ("int_set", 0) => Ok(Box::new(|_| {
                Ok(Dynamic::from(crate::script::int_set::IntSet::default()))
            })),
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
            ("schedule", 2 | 3) | ("schedule_at", 2 | 3) => {
                let args_of = (args.len() == 3).then(|| args.pop().expect("three arguments"));
                let handler = args.pop().expect("two arguments");
                let time = args.pop().expect("two arguments");
                let delay = name == "schedule";
                Ok(Box::new(move |f| {
                    let time = time(f)?.as_int().map_err(|_| Stop::Fallback)?;
                    let handler = handler(f)?;
                    let handler = handler
                        .as_immutable_string_ref()
                        .map_err(|_| Stop::Fallback)?;
                    let given = match &args_of {
                        Some(args_of) => args_of(f)?,
                        None => Dynamic::UNIT,
                    };
                    let when = if delay { (Some(time), 0) } else { (None, time) };
                    let caps = crate::script::schedule::caps(f.env.limits);
                    crate::script::schedule::schedule(f.env.schema, caps, when, &handler, given)
                        .map(Dynamic::from_int)
                        .map_err(|_| Stop::Fallback)
                }))
            }
            ("cancel", 1) => {
                let id = args.pop().expect("one argument");
                Ok(Box::new(move |f| {
                    let id = id(f)?.as_int().map_err(|_| Stop::Fallback)?;
                    crate::script::schedule::cancel(f.env.schema, id)
                        .map(Dynamic::from_bool)
                        .map_err(|_| Stop::Fallback)
                }))
            }
            ("now", 0) => Ok(Box::new(|_| {
                crate::script::world::now()
                    .map(Dynamic::from_int)
                    .map_err(|_| Stop::Fallback)
            })),
            ("env", 1) => {
                let name = args.pop().expect("one argument");
                Ok(Box::new(move |f| {
                    let name = name(f)?;
                    let name = name.as_immutable_string_ref().map_err(|_| Stop::Fallback)?;
                    crate::script::world::env(&name)
                        .map(Dynamic::from)
                        .map_err(|_| Stop::Fallback)
                }))
            }
            ("secret_eq", 2) => {
                let b = args.pop().expect("two arguments");
                let a = args.pop().expect("two arguments");
                Ok(Box::new(move |f| {
                    let (a, b) = (a(f)?, b(f)?);
                    let a = a.as_immutable_string_ref().map_err(|_| Stop::Fallback)?;
                    let b = b.as_immutable_string_ref().map_err(|_| Stop::Fallback)?;
                    Ok(Dynamic::from_bool(crate::script::settings::secret_eq(
                        &a, &b,
                    )))
                }))
            }
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
}

/// A built-in binary operator's call (`x op y`): the operator and its operands.
fn operator(call: &FnCallExpr) -> Option<(BinOp, &Expr, &Expr)> {
    let (false, Some(_), [x, y], Some(op)) = (
        call.capture_parent_scope,
        &call.op_token,
        &call.args[..],
        BinOp::from_name(call.name.as_str()),
    ) else {
        return None;
    };
    Some((op, x, y))
}

/// The key of `parts` when every one is an integer (`None`: the general way decides).
#[inline]
pub(super) fn int_key(
    parts: &[IntExpr],
    f: &mut Frame,
) -> Result<Option<crate::state::key::Key>, Stop> {
    let mut ints = [0i64; crate::state::key::KEY_PARTS_MAX];
    for (at, part) in parts.iter().enumerate() {
        match part.eval(f)? {
            Ok(i) => ints[at] = i,
            Err(_) => return Ok(None),
        }
    }
    Ok(Some(crate::state::key::Key::ints(&ints[..parts.len()])))
}
