//! json-filter's comparison of one JSON field with a parameter, shared by the plugins that
//! decide by it (`json-filter` keeps a record, `split-transform` routes it): an operator
//! (`==`, `!=`, `<`, `<=`, `>`, `>=`) and a value. A value that reads as a finite number
//! (`10`, `-2.5`) compares numerically with a field that reads as one (`12`, `"12"`); any
//! other value is text (`"eu"` with its quotes stripped, or a bare `eu`), compared with the
//! field's bytes as written (escapes not decoded).

use std::cmp::Ordering;

use crate::params::Error;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn parse(op: &str) -> Result<Self, Error> {
        Ok(match op {
            "==" => Self::Eq,
            "!=" => Self::Ne,
            "<" => Self::Lt,
            "<=" => Self::Le,
            ">" => Self::Gt,
            ">=" => Self::Ge,
            other => {
                return Err(Error::invalid_params(format!(
                    "parameter `op` = `{other}` is not one of ==, !=, <, <=, >, >="
                )));
            }
        })
    }

    fn holds(self, ordering: Ordering) -> bool {
        match self {
            Self::Eq => ordering.is_eq(),
            Self::Ne => ordering.is_ne(),
            Self::Lt => ordering.is_lt(),
            Self::Le => ordering.is_le(),
            Self::Gt => ordering.is_gt(),
            Self::Ge => ordering.is_ge(),
        }
    }
}

/// What the field is compared with.
#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Number(f64),
    Text(Vec<u8>),
}

impl Operand {
    fn parse(value: &str) -> Self {
        if let Some(text) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            return Self::Text(text.as_bytes().to_vec());
        }
        match value.parse::<f64>() {
            Ok(n) if n.is_finite() => Self::Number(n),
            _ => Self::Text(value.as_bytes().to_vec()),
        }
    }

    /// How `field` compares with the operand; `None` when they cannot be compared (a number
    /// against a field that is not one).
    fn compare(&self, field: &[u8]) -> Option<Ordering> {
        match self {
            Self::Text(text) => Some(field.cmp(text)),
            Self::Number(n) => std::str::from_utf8(field)
                .ok()?
                .parse::<f64>()
                .ok()?
                .partial_cmp(n),
        }
    }
}

/// An operator and a value, from a plugin's `op` and `value` parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    op: Op,
    operand: Operand,
}

impl Comparison {
    /// Parses the operator and the value.
    ///
    /// # Errors
    /// An operator that is none of the six, naming the parameter `op`.
    pub fn parse(op: &str, value: &str) -> Result<Self, Error> {
        Ok(Self {
            op: Op::parse(op)?,
            operand: Operand::parse(value),
        })
    }

    /// Whether `field` (a field's bytes as [`crate::json::Path::find`] returns them)
    /// compares true; false when it cannot be compared.
    #[must_use]
    pub fn holds(&self, field: &[u8]) -> bool {
        self.operand
            .compare(field)
            .is_some_and(|ordering| self.op.holds(ordering))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_numbers_compare_as_json_filter_does() {
        let c = |op: &str, value: &str, field: &str| {
            Comparison::parse(op, value)
                .unwrap()
                .holds(field.as_bytes())
        };
        assert!(c("==", "\"eu\"", "eu") && c("==", "eu", "eu") && !c("==", "eu", "us"));
        assert!(c(">", "10", "11") && c(">=", "10", "10") && !c("<", "10", "1e3"));
        assert!(
            !c("==", "10", "lots"),
            "a number against text cannot compare"
        );
        assert!(c("!=", "10", "9.5"));
        let err = Comparison::parse("=~", "1").unwrap_err();
        assert!(err.message.contains("`op` = `=~`"), "{err}");
    }
}
