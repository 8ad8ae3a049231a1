//! What the YAML deserializer hides: explicit tags and plain numbers too large for a float.
//!
//! serde_norway resolves `!!str 0.003` to the string "0.003" and hands a plain `1e400` (which
//! overflows a 64-bit float) over as the string "1e400", so the manifest would hash a value its
//! author did not write. Both are visible only in libyaml's event stream, which this walks once,
//! keeping the path of the current node so that a refusal names its field.

use std::mem::MaybeUninit;

/// A node the manifest cannot hash without ambiguity: its field and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub field: String,
    pub message: String,
}

enum Frame {
    /// The key being read (None between entries) and the keys read so far.
    Mapping {
        key: Option<String>,
        seen: std::collections::HashSet<String>,
    },
    Sequence {
        index: usize,
    },
}

/// How deep lists and mappings may nest in a manifest (a real one nests four or five levels).
pub const MAX_DEPTH: usize = 64;

/// The first explicitly tagged node or overflowing plain number in `text`, if any. Text libyaml
/// cannot parse gives `None`: the deserializer reports that with its own message.
pub fn first_refusal(text: &str) -> Option<Refusal> {
    let mut parser = Parser::new(text)?;
    let mut stack: Vec<Frame> = Vec::new();
    loop {
        let event = parser.next()?;
        match event {
            Event::StreamEnd => return None,
            Event::Other => {}
            Event::End => {
                stack.pop();
                value_done(&mut stack);
            }
            Event::Node {
                kind,
                tag,
                scalar,
                line,
            } => {
                let is_key = matches!(stack.last(), Some(Frame::Mapping { key: None, .. }));
                // The field's path is built only for a refusal: building it for every node
                // made deep nesting quadratic.
                let key = scalar.as_ref().filter(|_| is_key).map(|(v, _)| v.clone());
                if let Some(tag) = tag {
                    return Some(Refusal {
                        field: field_of(&stack, key.as_deref()),
                        message: format!(
                            "line {line}: the YAML tag `{}` is not allowed in a manifest (write the value plainly, quoted if it is a string)",
                            short_tag(&tag)
                        ),
                    });
                }
                match kind {
                    NodeKind::Scalar => {
                        let (value, plain) = scalar.unwrap_or_default();
                        if is_key {
                            // libyaml reads a repeated key without a word, and the deserializer
                            // then names the mapping's line, not the key's.
                            if let Some(Frame::Mapping { seen, .. }) = stack.last()
                                && seen.contains(&value)
                            {
                                return Some(Refusal {
                                    field: field_of(&stack, Some(&value)),
                                    message: format!(
                                        "line {line}: duplicate key `{value}` (given twice in one mapping)"
                                    ),
                                });
                            }
                            if let Some(Frame::Mapping { key, seen }) = stack.last_mut() {
                                seen.insert(value.clone());
                                *key = Some(value);
                            }
                            continue;
                        }
                        if plain && overflows_float(&value) {
                            return Some(Refusal {
                                field: field_of(&stack, key.as_deref()),
                                message: format!(
                                    "line {line}: `{value}` is beyond the range of a 64-bit float, so it cannot be hashed as a number"
                                ),
                            });
                        }
                        value_done(&mut stack);
                    }
                    NodeKind::Alias => {
                        if is_key {
                            if let Some(Frame::Mapping { key, .. }) = stack.last_mut() {
                                *key = Some("*alias".into());
                            }
                        } else {
                            value_done(&mut stack);
                        }
                    }
                    NodeKind::Sequence | NodeKind::Mapping if is_key => {
                        // A non-string key: the deserializer refuses it with its own message.
                        return None;
                    }
                    NodeKind::Sequence | NodeKind::Mapping if stack.len() >= MAX_DEPTH => {
                        return Some(Refusal {
                            field: field_of(&stack, key.as_deref()),
                            message: format!(
                                "line {line}: nested more than {MAX_DEPTH} levels deep, the most a manifest may be"
                            ),
                        });
                    }
                    NodeKind::Sequence => stack.push(Frame::Sequence { index: 0 }),
                    NodeKind::Mapping => stack.push(Frame::Mapping {
                        key: None,
                        seen: Default::default(),
                    }),
                }
            }
        }
    }
}

/// The dotted path of the node at the top of `stack` (a key's own name appended when the node
/// is that key), or `(the manifest)`.
fn field_of(stack: &[Frame], key: Option<&str>) -> String {
    let field = match key {
        Some(key) => join(&path(stack), key),
        None => path(stack),
    };
    if field.is_empty() {
        "(the manifest)".to_string()
    } else {
        field
    }
}

fn value_done(stack: &mut [Frame]) {
    match stack.last_mut() {
        Some(Frame::Mapping { key, .. }) => *key = None,
        Some(Frame::Sequence { index }) => *index += 1,
        None => {}
    }
}

fn path(stack: &[Frame]) -> String {
    let mut out = String::new();
    for frame in stack {
        match frame {
            Frame::Mapping { key: Some(key), .. } => out = join(&out, key),
            Frame::Mapping { key: None, .. } => {}
            Frame::Sequence { index } => out.push_str(&format!("[{index}]")),
        }
    }
    out
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `!!str` for the core schema's `tag:yaml.org,2002:str`, other tags as written.
fn short_tag(tag: &str) -> String {
    match tag.strip_prefix("tag:yaml.org,2002:") {
        Some(name) => format!("!!{name}"),
        None => tag.to_string(),
    }
}

/// A plain scalar in the form of a YAML 1.2 float (`[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`)
/// whose value is not finite, such as `1e400`.
fn overflows_float(text: &str) -> bool {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(at) => (&body[..at], Some(&body[at + 1..])),
        None => (body, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (mantissa, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(whole)
        && fraction.is_none_or(digits)
        && (!whole.is_empty() || fraction.is_some_and(|f| !f.is_empty()));
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok && body.parse::<f64>().is_ok_and(|v| !v.is_finite())
}

enum NodeKind {
    Scalar,
    Alias,
    Sequence,
    Mapping,
}

enum Event {
    Node {
        kind: NodeKind,
        /// An explicit tag (`!!str`, `!local`); `None` when the node has none.
        tag: Option<String>,
        /// A scalar's value, and whether it was written plain (unquoted, not a block scalar).
        scalar: Option<(String, bool)>,
        /// 1-based.
        line: u64,
    },
    End,
    StreamEnd,
    Other,
}

/// libyaml's parser over one borrowed text.
struct Parser<'a> {
    sys: Box<MaybeUninit<unsafe_libyaml_norway::yaml_parser_t>>,
    _text: &'a str,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Option<Parser<'a>> {
        let mut sys = Box::new(MaybeUninit::<unsafe_libyaml_norway::yaml_parser_t>::uninit());
        // SAFETY: initialize writes a valid parser into the allocation; the input pointer stays
        // valid for as long as the parser, which borrows `text` for its whole life.
        unsafe {
            if unsafe_libyaml_norway::yaml_parser_initialize(sys.as_mut_ptr()).fail {
                return None;
            }
            unsafe_libyaml_norway::yaml_parser_set_encoding(
                sys.as_mut_ptr(),
                unsafe_libyaml_norway::YAML_UTF8_ENCODING,
            );
            unsafe_libyaml_norway::yaml_parser_set_input_string(
                sys.as_mut_ptr(),
                text.as_ptr(),
                text.len() as u64,
            );
        }
        Some(Parser { sys, _text: text })
    }

    /// The next event, or `None` on a parse error.
    fn next(&mut self) -> Option<Event> {
        let mut event = MaybeUninit::<unsafe_libyaml_norway::yaml_event_t>::uninit();
        // SAFETY: the parser was initialized in `new`; a successful parse initializes `event`,
        // whose strings are read before `yaml_event_delete` frees them.
        unsafe {
            if unsafe_libyaml_norway::yaml_parser_parse(self.sys.as_mut_ptr(), event.as_mut_ptr())
                .fail
            {
                return None;
            }
            let event = event.assume_init_mut();
            let line = event.start_mark.line + 1;
            let converted = match event.type_ {
                unsafe_libyaml_norway::YAML_STREAM_END_EVENT => Event::StreamEnd,
                unsafe_libyaml_norway::YAML_SEQUENCE_END_EVENT
                | unsafe_libyaml_norway::YAML_MAPPING_END_EVENT => Event::End,
                unsafe_libyaml_norway::YAML_ALIAS_EVENT => Event::Node {
                    kind: NodeKind::Alias,
                    tag: None,
                    scalar: None,
                    line,
                },
                unsafe_libyaml_norway::YAML_SCALAR_EVENT => {
                    let scalar = event.data.scalar;
                    let bytes = std::slice::from_raw_parts(scalar.value, scalar.length as usize);
                    Event::Node {
                        kind: NodeKind::Scalar,
                        tag: c_string(scalar.tag),
                        scalar: Some((
                            String::from_utf8_lossy(bytes).into_owned(),
                            scalar.style == unsafe_libyaml_norway::YAML_PLAIN_SCALAR_STYLE,
                        )),
                        line,
                    }
                }
                unsafe_libyaml_norway::YAML_SEQUENCE_START_EVENT => Event::Node {
                    kind: NodeKind::Sequence,
                    tag: c_string(event.data.sequence_start.tag),
                    scalar: None,
                    line,
                },
                unsafe_libyaml_norway::YAML_MAPPING_START_EVENT => Event::Node {
                    kind: NodeKind::Mapping,
                    tag: c_string(event.data.mapping_start.tag),
                    scalar: None,
                    line,
                },
                _ => Event::Other,
            };
            unsafe_libyaml_norway::yaml_event_delete(event);
            Some(converted)
        }
    }
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        // SAFETY: the parser was initialized in `new` and is deleted once.
        unsafe { unsafe_libyaml_norway::yaml_parser_delete(self.sys.as_mut_ptr()) }
    }
}

/// A NUL-terminated libyaml string, or `None` for a null pointer.
///
/// # Safety
/// `ptr` is null or points to a NUL-terminated string that outlives the call.
unsafe fn c_string(ptr: *const u8) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: as the caller promises.
    let text = unsafe { std::ffi::CStr::from_ptr(ptr.cast()) };
    Some(text.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(text: &str) -> Option<(String, String)> {
        first_refusal(text).map(|r| (r.field, r.message))
    }

    #[test]
    fn tags_are_refused_with_their_field() {
        let (field, message) = refusal("config:\n  lr: !!str 0.003\n").unwrap();
        assert_eq!(field, "config.lr");
        assert!(
            message.contains("line 2") && message.contains("`!!str`"),
            "{message}"
        );
        let (field, _) = refusal("config: {hidden: [64, !!int 32]}\n").unwrap();
        assert_eq!(field, "config.hidden[1]");
        let (field, message) = refusal("eval: !thing {a: 1}\n").unwrap();
        assert_eq!(field, "eval");
        assert!(message.contains("`!thing`"), "{message}");
        let (field, _) = refusal("!!str seed: 1\n").unwrap();
        assert_eq!(field, "seed");
    }

    #[test]
    fn overflowing_plain_numbers_are_refused_but_quoted_ones_are_strings() {
        let (field, message) = refusal("seed: 1\nconfig:\n  lr: 1e400\n").unwrap();
        assert_eq!(field, "config.lr");
        assert!(message.contains("`1e400`"), "{message}");
        assert!(refusal("config:\n  lr: -1.5E+999\n").is_some());
        assert_eq!(refusal("config:\n  lr: \"1e400\"\n"), None);
        assert_eq!(refusal("a: 1e300\nb: .inf\nc: 1e4x\nd: e400\n"), None);
    }

    #[test]
    fn a_repeated_key_is_named_at_its_own_line() {
        let text = "seed: 7\nconfig:\n  lr: 0.1\n  hidden: [8]\n  lr: 0.2\n";
        let (field, message) = refusal(text).expect("refused");
        assert_eq!(field, "config.lr");
        assert!(
            message.starts_with("line 5: duplicate key `lr`"),
            "{message}"
        );
        assert_eq!(
            refusal("a: {x: 1}\nb: {x: 2}\n"),
            None,
            "the same key in two mappings"
        );
    }

    #[test]
    fn deep_nesting_is_refused_at_once_naming_the_limit() {
        let deep = format!(
            "config:\n  x: {}{}\n",
            "[".repeat(200_000),
            "]".repeat(200_000)
        );
        let started = std::time::Instant::now();
        let (field, message) = refusal(&deep).expect("refused");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert!(field.starts_with("config.x"), "{field}");
        assert!(message.contains("more than 64 levels"), "{message}");
        let fine = format!("config:\n  x: {}{}\n", "[".repeat(60), "]".repeat(60));
        assert_eq!(refusal(&fine), None);
    }

    #[test]
    fn plain_manifests_and_broken_yaml_pass_through() {
        let text = "run_id: r\nseed: 7\nconfig: {lr: 0.003, hidden: [64, 32]}\nlist:\n  - a: 1\n  - [x, y]\nref: &x 1\nagain: *x\n";
        assert_eq!(refusal(text), None);
        assert_eq!(refusal("a: [1, 2\nb: 3\n"), None);
    }
}
