//! Chains: property, index and method steps on a value, and the table and row API they reach.

use rhai::{ASTFlags, Dynamic, Expr, FnCallExpr};

use super::*;
use crate::rhai_ast::compiled::answer::AnswerList;
use crate::rhai_ast::compiled::ops::{self, Method};
use crate::rhai_ast::compiled::{Code, Frame, Outcome};
use crate::script::api::{self, Row, Table};
use crate::state::fields::Fields;
use crate::state::schema::TableId;

impl Compiler<'_> {
    /// `root.a[i].m(x)...`: its arguments are evaluated first, in order, then the chain is walked
    /// from the root (in place when the root is a local), as Rhai does.
    pub(super) fn chain(&mut self, expr: &Expr) -> Compiled<Code> {
        if let Some(code) = self.table_key_call(expr)? {
            return Ok(code);
        }
        if let Some(code) = self.map_call(expr)? {
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
        // `row.save()` on a local: the row saved where it lies, with no walk.
        let saves_root = match (&root, steps.as_slice()) {
            (
                Root::Local {
                    slot,
                    constant: false,
                },
                [Step::Method(Method::Save, 0)],
            ) => Some(*slot),
            _ => None,
        };
        let general: Code = Box::new(move |f| {
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
        });
        Ok(match saves_root {
            Some(slot) => Box::new(move |f| {
                // As `ops::call_method` saves a row; anything else the general way.
                if let Some(mut row) = f.local_same_sizes(slot).write_lock::<Row>() {
                    row.save().map_err(|_| Stop::Fallback)?;
                    return Ok(Dynamic::UNIT);
                }
                general(f)
            }),
            None => general,
        })
    }

    /// `table.get(a, b)` whose parts are pieces (they change nothing, so that they can be
    /// evaluated again): the table and the parts compiled as integers, for a statement that
    /// reads the row into a local (`get_into_local`). Compiled after the general code, which
    /// counts the operations.
    pub(super) fn row_get(&mut self, expr: &Expr) -> Compiled<Option<(Table, Vec<IntExpr>)>> {
        let Expr::Dot(chain, flags, _) = expr else {
            return Ok(None);
        };
        let (Expr::Variable(variable, ..), Expr::MethodCall(call, _)) = (&chain.lhs, &chain.rhs)
        else {
            return Ok(None);
        };
        match self.piece_get(&variable.1, call, flags.is_empty()) {
            Some(id) => Ok(Some((Table { id }, self.uncounted_parts(&call.args)?))),
            None => Ok(None),
        }
    }

    /// The table of `table.get(a, b)` (`name` a table, not a local; `get` not redefined; one
    /// to four parts, each a piece), if the call is one.
    pub(super) fn piece_get(&self, name: &str, call: &FnCallExpr, plain: bool) -> Option<TableId> {
        let (Some(id), None, true, "get", false, 1..=crate::state::key::KEY_PARTS_MAX) = (
            self.schema.table_id(name),
            self.slot_of(name),
            plain,
            call.name.as_str(),
            self.script_names.contains("get"),
            call.args.len(),
        ) else {
            return None;
        };
        call.args
            .iter()
            .all(|arg| self.is_piece(arg, None))
            .then_some(id)
    }

    /// Key parts compiled again as integers beside the general code, which counts the
    /// operations: these count none.
    pub(super) fn uncounted_parts(&mut self, args: &[Expr]) -> Compiled<Vec<IntExpr>> {
        let nodes = self.nodes;
        let parts = args
            .iter()
            .map(|arg| self.int_operand(arg))
            .collect::<Compiled<Vec<IntExpr>>>()?;
        self.nodes = nodes;
        Ok(parts)
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
            .collect::<Compiled<Vec<IntExpr>>>()?;
        let row = match row_arg.first() {
            Some(Expr::Array(items, _)) if self.is_field_list(id, items) => {
                // Counted as `expr` counts an array literal: one node, and its items.
                self.nodes += 1;
                RowCode::Fields(
                    items
                        .iter()
                        .map(|item| self.field_code(item))
                        .collect::<Compiled<_>>()?,
                )
            }
            Some(row) => RowCode::Value(self.expr(row)?),
            None => RowCode::None,
        };
        let table = Table { id };
        Ok(Some(Box::new(move |f| {
            let mut ints = [0i64; crate::state::key::KEY_PARTS_MAX];
            let mut values: Vec<ops::IntOr> = Vec::new();
            for (at, part) in parts.iter().enumerate() {
                match part.eval(f)? {
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
                RowCode::Fields(items) if values.is_empty() => {
                    let key = crate::state::key::Key::ints(&ints[..parts.len()]);
                    let fields = fields_of(items, table, f)?;
                    let must_be_new = method == Method::Insert;
                    ops::api(api::put_fields(table, key, fields, must_be_new))?;
                    return Ok(Dynamic::UNIT);
                }
                RowCode::Fields(items) => {
                    let mut array = Vec::with_capacity(items.len());
                    for item in items {
                        array.push(ops::from_int_or(item.general(f)?));
                    }
                    let array = Dynamic::from_array(array);
                    ops::fits(&array, f.env)?;
                    Some(array)
                }
                RowCode::Value(row) => Some(row(f)?),
                RowCode::None => None,
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

    /// Whether an array literal given as a new row of `table` can be made straight into its
    /// fields: no more items than the table has fields, each a value that changes nothing and
    /// builds no row (an `answer::Piece`'s kind, or `local[name]`), so that the items can be
    /// read into the thread's row buffer as they are evaluated.
    fn is_field_list(&self, table: TableId, items: &[Expr]) -> bool {
        items.len() <= self.schema.table(table).fields.len()
            && items.iter().all(|item| {
                self.is_piece(item, None)
                    || matches!(item, Expr::Index(chain, flags, _)
                        if !flags.contains(ASTFlags::NEGATED)
                            && matches!((&chain.lhs, &chain.rhs),
                                (Expr::Variable(a, ..), Expr::Variable(b, ..))
                                    if self.slot_of(&a.1).is_some() && self.slot_of(&b.1).is_some()))
            })
    }

    fn field_code(&mut self, item: &Expr) -> Compiled<FieldCode> {
        if let Expr::Index(chain, _, _) = item {
            if let (Expr::Variable(row, ..), Expr::Variable(name, ..)) = (&chain.lhs, &chain.rhs) {
                let general = self.int_operand(item)?;
                let row = self.local(&row.1).expect("a local").0;
                let name = self.local(&name.1).expect("a local").0;
                return Ok(FieldCode::Named { row, name, general });
            }
        }
        Ok(FieldCode::Value(self.int_operand(item)?))
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

    /// `chain.map(|x| ...)` (`map` last, with an anonymous function, or `Fn("name")`, of one
    /// parameter): the chain before it compiled as a chain of its own, then the function called
    /// on each item of the array it gives, as compiled code calls a script function. Rhai runs
    /// an anonymous function as a script function of its own (with closures off it captures
    /// nothing), so the compiled function is the same code. Anything else is the general way.
    fn map_call(&mut self, expr: &Expr) -> Compiled<Option<Code>> {
        let Some((before, call)) = split_last_method(expr) else {
            return Ok(None);
        };
        if call.name != "map" || self.script_names.contains("map") {
            return Ok(None);
        }
        let [Expr::DynamicConstant(pointer, _)] = &call.args[..] else {
            return Ok(None);
        };
        let Some(name) = pointer
            .read_lock::<rhai::FnPtr>()
            .filter(|p| !p.is_curried())
            .map(|p| ImmutableString::from(p.fn_name()))
        else {
            return Ok(None);
        };
        let Some(&function) = self.index.get(&(name, 1)) else {
            return Ok(None);
        };
        self.callees.push(function);
        // The method and its argument, as the general way counts them.
        self.nodes += 2;
        let array = self.expr(&before)?;
        Ok(Some(Box::new(move |f| {
            let items = array(f)?.try_cast::<rhai::Array>().ok_or(Stop::Fallback)?;
            let mut out = rhai::Array::with_capacity(items.len());
            for item in items {
                out.push(f.call(function, vec![item])?);
            }
            let out = Dynamic::from_array(out);
            ops::fits(&out, f.env)?;
            Ok(out)
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

/// The row argument of a table's `insert` or `put`.
enum RowCode {
    None,
    Value(Code),
    /// An array literal made straight into the row's fields (`Compiler::is_field_list`).
    Fields(Vec<FieldCode>),
}

/// An item of an array literal made straight into a row's field.
enum FieldCode {
    /// Any value: an integer kept out of a `Dynamic`.
    Value(IntExpr),
    /// `row[name]`: a row's string field copied from where it lies, or the value the general
    /// code makes.
    Named {
        row: usize,
        name: usize,
        general: IntExpr,
    },
}

impl FieldCode {
    fn general(&self, f: &mut Frame) -> Result<ops::IntOr, Stop> {
        match self {
            FieldCode::Value(code) | FieldCode::Named { general: code, .. } => code.eval(f),
        }
    }
}

/// The fields of a new row of `table` made from an array literal's items, checked as `put`
/// checks an array (the table's types, values it can store) and as the literal is checked
/// (the size limits): any refusal sends the call to Rhai, which reports it.
fn fields_of(items: &[FieldCode], table: Table, f: &mut Frame) -> Result<Fields, Stop> {
    let env = f.env;
    let declared = env.schema.table(table.id);
    let mut sizes = ops::Sizes::default();
    let fields = Fields::build(declared.fields.len(), |b| {
        for (slot, item) in items.iter().enumerate() {
            if let FieldCode::Named { row, name, .. } = item {
                let (row, name) = (f.local_ref(*row), f.local_ref(*name));
                if let (Some(row), Ok(name)) =
                    (row.read_lock::<Row>(), name.as_immutable_string_ref())
                {
                    let text = env
                        .schema
                        .field_slot(row.table, name.as_str())
                        .and_then(|s| row.str(s));
                    if let Some(text) = text {
                        if text.len() > env.limits.string_bytes_max || !declared.takes_string(slot)
                        {
                            return Err(Stop::Fallback);
                        }
                        sizes = sizes.plus(ops::Sizes::text(text.len()));
                        b.set_str(slot, text);
                        continue;
                    }
                }
            }
            match item.general(f)? {
                Ok(i) => {
                    declared
                        .check(slot, &Dynamic::from_int(i))
                        .map_err(|_| Stop::Fallback)?;
                    b.set_int(slot, i);
                }
                Err(value) => {
                    api::check_field(env.schema, table.id, slot, &value)
                        .map_err(|_| Stop::Fallback)?;
                    sizes = sizes.plus(ops::Sizes::of(&value));
                    b.set_value(slot, &value);
                }
            }
        }
        // The fields the literal leaves unset are unit, which a required field refuses.
        (items.len()..declared.fields.len()).try_for_each(|slot| {
            declared
                .check(slot, &Dynamic::UNIT)
                .map_err(|_| Stop::Fallback)
        })
    })?;
    // As the literal is checked: an array of these items.
    sizes
        .plus(ops::Sizes::array_of(items.len()))
        .within(env.limits)?;
    Ok(fields)
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

/// A chain without its last step when that step is a method call: `a.b.m(x)` as `a.b` and
/// `m(x)`. Rhai nests a chain to the right (`a.b.m(x)` is `a . (b . m(x))`).
fn split_last_method(expr: &Expr) -> Option<(Expr, &FnCallExpr)> {
    let Expr::Dot(chain, flags, at) = expr else {
        return None;
    };
    if !flags.is_empty() {
        return None;
    }
    match &chain.rhs {
        Expr::MethodCall(call, _) => Some((chain.lhs.clone(), call)),
        inner @ Expr::Dot(..) => {
            // `b . m(x)`: `b` is already what follows a dot (a property, a method call).
            let (rest, call) = split_last_method(inner)?;
            let lhs = chain.lhs.clone();
            Some((
                Expr::Dot(Box::new(rhai::BinaryExpr { lhs, rhs: rest }), *flags, *at),
                call,
            ))
        }
        _ => None,
    }
}
