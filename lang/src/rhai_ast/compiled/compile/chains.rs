//! Chains: property, index and method steps on a value, and the table and row API they reach.

use rhai::{ASTFlags, Dynamic, Expr};

use super::*;
use crate::rhai_ast::compiled::answer::AnswerList;
use crate::rhai_ast::compiled::ops::{self, Method};
use crate::rhai_ast::compiled::{Code, Frame, Outcome};
use crate::script::api::Table;

impl Compiler<'_> {
    /// `root.a[i].m(x)...`: its arguments are evaluated first, in order, then the chain is walked
    /// from the root (in place when the root is a local), as Rhai does.
    pub(super) fn chain(&mut self, expr: &Expr) -> Compiled<Code> {
        if let Some(code) = self.table_key_call(expr)? {
            return Ok(code);
        }
        if let Some(code) = self.list_push(expr)? {
            return Ok(code);
        }
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
        // `save` changes a row in place, `insert` an `int_set()`; neither is in the first
        // parameter unless assigned there.
        let changes = steps.iter().any(|s| {
            matches!(
                s,
                Step::Method(Method::Push | Method::Save | Method::Insert, _)
            )
        });
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
                    let item = values.next().expect("one argument");
                    push_on_local(f, *slot, *constant, item)
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

    /// `table.get(a, b)`, `table.insert(a, b, row)` and the other calls of a table's method
    /// that takes a key, as a whole chain: the key's parts are compiled as integers
    /// (`Compiler::int_operand`) and, when they are integers, make the key directly. Other parts
    /// (a string key) go the general way, `ops::table_method`, with the values already made.
    fn table_key_call(&mut self, expr: &Expr) -> Compiled<Option<Code>> {
        let Expr::Dot(chain, flags, _) = expr else {
            return Ok(None);
        };
        let (Expr::Variable(variable, ..), Expr::MethodCall(call, _)) = (&chain.lhs, &chain.rhs)
        else {
            return Ok(None);
        };
        let name = call.name.as_str();
        let (Some(id), None, false, Some(method)) = (
            self.schema.table_id(&variable.1),
            self.slot_of(&variable.1),
            self.script_names.contains(name) || !flags.is_empty(),
            Method::from_name(name),
        ) else {
            return Ok(None);
        };
        let with_row = match (method, call.args.len()) {
            (Method::Get | Method::Exists | Method::Delete, 1..=4) => false,
            (Method::Insert | Method::Put, 2..=5) => true,
            _ => return Ok(None),
        };
        // Counted as the general way counts the call: one node for the method, and its
        // arguments as expressions.
        self.nodes += 1;
        let (key_args, row_arg) = match with_row {
            true => call.args.split_at(call.args.len() - 1),
            false => (&call.args[..], &[][..]),
        };
        let parts = key_args
            .iter()
            .map(|e| self.int_operand(e))
            .collect::<Compiled<Vec<IntCode>>>()?;
        let row = row_arg.first().map(|e| self.expr(e)).transpose()?;
        let table = Table { id };
        Ok(Some(Box::new(move |f| {
            let mut ints = [0i64; crate::state::key::KEY_PARTS_MAX];
            let mut values: Vec<ops::IntOr> = Vec::new();
            for (at, part) in parts.iter().enumerate() {
                match part(f)? {
                    Ok(i) if values.is_empty() => ints[at] = i,
                    // A part that is not an integer: every part goes the general way.
                    part => {
                        if values.is_empty() {
                            values.extend(ints[..at].iter().map(|&i| Ok(i)));
                        }
                        values.push(part);
                    }
                }
            }
            let row = match &row {
                Some(row) => Some(row(f)?),
                None => None,
            };
            let env = f.env;
            if values.is_empty() {
                return ops::table_key_method(method, table, &ints[..parts.len()], row, env);
            }
            let mut args: Vec<Dynamic> = values.into_iter().map(ops::from_int_or).collect();
            args.extend(row);
            ops::table_method(method, table, args, env)
        })))
    }

    /// `list.push(#{..})` on a local that may be an answer's list (see `answer`): the item
    /// written as text when the local is one, pushed as a map otherwise, exactly as the general
    /// way pushes it.
    fn list_push(&mut self, expr: &Expr) -> Compiled<Option<Code>> {
        let Expr::Dot(chain, flags, _) = expr else {
            return Ok(None);
        };
        let (Expr::Variable(variable, ..), Expr::MethodCall(call, _)) = (&chain.lhs, &chain.rhs)
        else {
            return Ok(None);
        };
        let (true, Some(_), "push", false, [Expr::Map(map, _)]) = (
            flags.is_empty(),
            self.list_slot(&variable.1),
            call.name.as_str(),
            self.script_names.contains(call.name.as_str()),
            &call.args[..],
        ) else {
            return Ok(None);
        };
        let (entries, template) = &**map;
        let Some((order, keys)) = Self::literal_layout(entries, template) else {
            return Ok(None);
        };
        // Counted as the general way counts it: the method, the literal, and its values.
        self.nodes += 2;
        // The values first, as they run: a value that reads the list is not its last read
        // (the push comes after), and makes it an array.
        let values = entries
            .iter()
            .map(|(_, v)| self.expr(v))
            .collect::<Compiled<Vec<Code>>>()?;
        let slot = self.local_for_list(&variable.1).expect("a local");
        let pieces = self.pieces(entries, &order, Some(slot))?;
        let constant = self.scope[slot].constant;
        let template: rhai::Map = template.clone();
        Ok(Some(Box::new(move |f| {
            if let Some(pieces) = &pieces {
                if f.local_ref(slot).is::<AnswerList>() {
                    // Out of its local while the pieces are read (none reads it).
                    let mut list = std::mem::take(f.local_same_sizes(slot));
                    let pushed = list
                        .write_lock::<AnswerList>()
                        .expect("an answer's list")
                        .push_pieces(&keys, pieces, f);
                    *f.local_same_sizes(slot) = list;
                    pushed?;
                    return Ok(Dynamic::UNIT);
                }
            }
            let mut evaluated = Vec::with_capacity(values.len());
            for value in &values {
                evaluated.push(value(f)?);
            }
            let env = f.env;
            if let Some(mut list) = f.local_same_sizes(slot).write_lock::<AnswerList>() {
                let ordered: Vec<Dynamic> = order
                    .iter()
                    .map(|&at| std::mem::take(&mut evaluated[at]))
                    .collect();
                list.push(&keys, &ordered, env)?;
                return Ok(Dynamic::UNIT);
            }
            let item = ops::place_map(template.clone(), &order, evaluated);
            ops::fits(&item, env)?;
            push_on_local(f, slot, constant, item)
        })))
    }

    pub(super) fn dot_steps(
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

    pub(super) fn index_steps(
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

/// `local.push(item)`: the local's sizes after are its sizes before and the item's, and the
/// check of the local is the check of the array pushed into.
fn push_on_local(f: &mut Frame, slot: usize, constant: bool, item: Dynamic) -> Outcome {
    let env = f.env;
    let (target, before) = f.local_sized(slot);
    let known = before.map(|before| before.pushed(ops::Sizes::of(&item)));
    ops::push(target, item, constant)?;
    let sizes = ops::fits_known(target, known, env)?;
    f.keep_sizes(slot, sizes);
    Ok(Dynamic::UNIT)
}
