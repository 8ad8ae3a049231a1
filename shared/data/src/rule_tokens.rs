//! Split rules as tokens: words, quoted text, operators, brackets, commas and `..`. Quotes are
//! read before any operator is looked for, so `region != "a==b"` compares with the text `a==b`,
//! and a column whose name holds a space or an operator is written in quotes or backticks left of
//! the operator: `` `trip distance` < 5 ``, `"home region" in (north, "south west")`.

/// One token of a rule.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Token {
    /// A bare word: a column's name, a number, a date, `in`, `hash`, `true`.
    Word(String),
    /// Text in quotes: `"…"` or `'…'` (a value, or left of an operator a column's name) or
    /// `` `…` `` (a column's name only).
    Quoted {
        text: String,
        quote: char,
    },
    Op(Op),
    Open,
    Close,
    Comma,
    /// `..` between the two ends of a period.
    DotDot,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Token {
    /// The token as the rule wrote it, for messages.
    pub(crate) fn written(&self) -> String {
        match self {
            Token::Word(word) => word.clone(),
            Token::Quoted { text, quote } => format!("{quote}{text}{quote}"),
            Token::Op(op) => op.written().to_string(),
            Token::Open => "(".into(),
            Token::Close => ")".into(),
            Token::Comma => ",".into(),
            Token::DotDot => "..".into(),
        }
    }
}

impl Op {
    pub(crate) const fn written(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }
}

/// Characters that end a bare word.
const SPECIAL: &str = "\"'`(),<>=!";

/// The tokens of `rule`, or why it cannot be read (an unclosed quote, a lone `=` or `!`).
pub(crate) fn tokenize(rule: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = rule.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            c if c.is_whitespace() => i += 1,
            '"' | '\'' | '`' => {
                let close = chars[i + 1..]
                    .iter()
                    .position(|&d| d == c)
                    .ok_or_else(|| format!("unclosed {c} in `{rule}`"))?;
                let text: String = chars[i + 1..i + 1 + close].iter().collect();
                tokens.push(Token::Quoted { text, quote: c });
                i += close + 2;
            }
            '(' | ')' | ',' => {
                tokens.push(match c {
                    '(' => Token::Open,
                    ')' => Token::Close,
                    _ => Token::Comma,
                });
                i += 1;
            }
            '<' | '>' | '=' | '!' => {
                let (op, len) = match (c, next) {
                    ('<', Some('=')) => (Op::Le, 2),
                    ('>', Some('=')) => (Op::Ge, 2),
                    ('=', Some('=')) => (Op::Eq, 2),
                    ('!', Some('=')) => (Op::Ne, 2),
                    ('<', _) => (Op::Lt, 1),
                    ('>', _) => (Op::Gt, 1),
                    _ => {
                        return Err(format!(
                            "`{c}` is not an operator in `{rule}` (use ==, !=, <, <=, > or >=)"
                        ));
                    }
                };
                tokens.push(Token::Op(op));
                i += len;
            }
            '.' if next == Some('.') => {
                tokens.push(Token::DotDot);
                i += 2;
            }
            _ => {
                let start = i;
                while i < chars.len() {
                    let d = chars[i];
                    let dot_dot = d == '.' && chars.get(i + 1) == Some(&'.');
                    if d.is_whitespace() || SPECIAL.contains(d) || dot_dot {
                        break;
                    }
                    i += 1;
                }
                tokens.push(Token::Word(chars[start..i].iter().collect()));
            }
        }
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(w: &str) -> Token {
        Token::Word(w.into())
    }

    fn quoted(text: &str, quote: char) -> Token {
        Token::Quoted {
            text: text.into(),
            quote,
        }
    }

    #[test]
    fn operators_inside_quotes_are_text() {
        assert_eq!(
            tokenize(r#"region != "a==b""#).unwrap(),
            vec![word("region"), Token::Op(Op::Ne), quoted("a==b", '"')]
        );
        assert_eq!(
            tokenize("region in ('a==b', x,y)").unwrap(),
            vec![
                word("region"),
                word("in"),
                Token::Open,
                quoted("a==b", '\''),
                Token::Comma,
                word("x"),
                Token::Comma,
                word("y"),
                Token::Close
            ]
        );
    }

    #[test]
    fn names_with_spaces_dates_periods_and_fractions() {
        assert_eq!(
            tokenize("`trip distance`<=5.5").unwrap(),
            vec![quoted("trip distance", '`'), Token::Op(Op::Le), word("5.5")]
        );
        assert_eq!(
            tokenize("2017-01..2017-03").unwrap(),
            vec![word("2017-01"), Token::DotDot, word("2017-03")]
        );
        assert_eq!(
            tokenize("0.8 <= hash(id)").unwrap(),
            vec![
                word("0.8"),
                Token::Op(Op::Le),
                word("hash"),
                Token::Open,
                word("id"),
                Token::Close
            ]
        );
        assert_eq!(
            tokenize("t >= 2017-01-01T10:00:00").unwrap(),
            vec![word("t"), Token::Op(Op::Ge), word("2017-01-01T10:00:00")]
        );
    }

    #[test]
    fn unreadable_rules_say_why() {
        assert!(tokenize("a == 'x").unwrap_err().contains("unclosed '"));
        assert!(tokenize("a = x").unwrap_err().contains("not an operator"));
        assert!(tokenize("a ! x").unwrap_err().contains("not an operator"));
    }
}
