//! Avro name checks without regular expressions.
//!
//! `apache_avro` checks every name, namespace and field name of every schema it parses against
//! the Avro specification's rules with regular expressions (`regex_lite`'s backtracking-free
//! but slow PikeVM), and the iceberg crate parses the manifest schema of each manifest's
//! header twice. On a cold scan of a table upserted 300 times (600 manifests) those checks are
//! 7% of the CPU. [`install`] registers the same rules, checked by hand, before any schema is
//! parsed: names and field names are `[A-Za-z_][A-Za-z0-9_]*`, a namespace is empty or such
//! names joined by dots, and a full name is an optional namespace and a dot before a name.
//! What they accept and refuse, and the errors, are `apache_avro`'s own.

use std::sync::Once;

use apache_avro::AvroResult;
use apache_avro::error::Details;
use apache_avro::schema::Namespace;
use apache_avro::validator::{
    EnumSymbolNameValidator, RecordFieldNameValidator, SchemaNameValidator,
    SchemaNamespaceValidator, set_enum_symbol_name_validator, set_record_field_name_validator,
    set_schema_name_validator, set_schema_namespace_validator,
};

/// The expressions `apache_avro` names in its errors.
const SCHEMA_NAME: &str = r"^((?P<namespace>([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)?)\.)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)$";
const NAMESPACE: &str = r"^([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*)?$";

/// Registers the checks for the process (once; a no-op if a schema was parsed before, which
/// registered `apache_avro`'s own).
pub fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        // Each is refused only when one is registered already: the rules are the same.
        let _ = set_schema_name_validator(Box::new(SpecificationNames));
        let _ = set_schema_namespace_validator(Box::new(SpecificationNames));
        let _ = set_enum_symbol_name_validator(Box::new(SpecificationNames));
        let _ = set_record_field_name_validator(Box::new(SpecificationNames));
    });
}

/// The specification's rules, by hand.
struct SpecificationNames;

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Empty, or names joined by dots.
fn is_namespace(namespace: &str) -> bool {
    namespace.is_empty() || namespace.split('.').all(is_name)
}

impl SchemaNameValidator for SpecificationNames {
    fn validate(&self, schema_name: &str) -> AvroResult<(String, Namespace)> {
        let invalid = || Details::InvalidSchemaName(schema_name.to_string(), SCHEMA_NAME);
        match schema_name.rsplit_once('.') {
            None if is_name(schema_name) => Ok((schema_name.to_string(), None)),
            Some((namespace, name)) if is_name(name) && is_namespace(namespace) => {
                Ok((name.to_string(), Some(namespace.to_string())))
            }
            _ => Err(invalid().into()),
        }
    }
}

impl SchemaNamespaceValidator for SpecificationNames {
    fn validate(&self, namespace: &str) -> AvroResult<()> {
        if is_namespace(namespace) {
            Ok(())
        } else {
            Err(Details::InvalidNamespace(namespace.to_string(), NAMESPACE).into())
        }
    }
}

impl EnumSymbolNameValidator for SpecificationNames {
    fn validate(&self, symbol: &str) -> AvroResult<()> {
        if is_name(symbol) {
            Ok(())
        } else {
            Err(Details::EnumSymbolName(symbol.to_string()).into())
        }
    }
}

impl RecordFieldNameValidator for SpecificationNames {
    fn validate(&self, field_name: &str) -> AvroResult<()> {
        if is_name(field_name) {
            Ok(())
        } else {
            Err(Details::FieldName(field_name.to_string()).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cases `apache_avro`'s expressions decide, with their answers.
    #[test]
    fn names_are_checked_as_the_specification_expressions_check_them() {
        let names = SpecificationNames;
        let full = |n: &str| SchemaNameValidator::validate(&names, n).ok();
        let some = |name: &str, namespace: Option<&str>| {
            Some((name.to_string(), namespace.map(str::to_string)))
        };
        assert_eq!(full("manifest_entry"), some("manifest_entry", None));
        assert_eq!(full("r2"), some("r2", None));
        assert_eq!(full("_x"), some("_x", None));
        assert_eq!(
            full("org.apache.iceberg.r102"),
            some("r102", Some("org.apache.iceberg"))
        );
        // An empty namespace before the dot is a namespace, empty.
        assert_eq!(full(".name"), some("name", Some("")));
        for bad in [
            "", "2x", "a-b", "a..b", "a.", "a.2b", ".", "a b", "ä", "a.b-c.d",
        ] {
            assert_eq!(full(bad), None, "{bad:?}");
        }

        let namespace = |n: &str| SchemaNamespaceValidator::validate(&names, n).is_ok();
        for good in ["", "a", "org.apache.iceberg", "_a.b_2"] {
            assert!(namespace(good), "{good:?}");
        }
        for bad in [".", "a.", ".a", "a..b", "2a", "a.-"] {
            assert!(!namespace(bad), "{bad:?}");
        }

        let field = |n: &str| RecordFieldNameValidator::validate(&names, n).is_ok();
        let symbol = |n: &str| EnumSymbolNameValidator::validate(&names, n).is_ok();
        let checks: [&dyn Fn(&str) -> bool; 2] = [&field, &symbol];
        for check in checks {
            for good in ["a", "_", "data_file", "A9_z"] {
                assert!(check(good), "{good:?}");
            }
            for bad in ["", "9", "a.b", "a-b", "é"] {
                assert!(!check(bad), "{bad:?}");
            }
        }
    }
}
