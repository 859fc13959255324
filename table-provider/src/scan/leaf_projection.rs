//! Reading only the leaves of struct columns a query uses.
//!
//! DataFusion hands a table provider whole top-level columns, and its Parquet opener reads a
//! projected struct whole (`ProjectionMask::roots`). When every use of a struct column in the
//! projection above the scan (and in the scan's pushed filters) is a field access
//! (`s.a`, `s['a']`, `s.a.x`), Petrel narrows the struct instead:
//!
//! 1. [`LeafProjection::from_uses`] collects, per struct column, the Iceberg field ids of the
//!    fields accessed (a field accessed whole keeps its whole subtree).
//! 2. [`LeafProjectingReaderFactory`] hands the Parquet opener each data file's footer with
//!    the struct's other leaves removed from the schema, the row groups' column chunks and the
//!    page index. Column-chunk offsets are absolute, so the reader fetches and decodes only the
//!    kept leaves.
//! 3. The field-id schema mapping then sees a file whose struct lacks the other fields and fills
//!    them with nulls — which nothing reads: the projection above only accesses kept fields.
//!
//! Fields are matched by field id in the file (renamed fields are found); a struct node or
//! field without an id in the file is kept whole.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::ScalarFunctionExpr;
use datafusion::physical_expr::expressions::{Column, Literal};
use parquet::basic::{ConvertedType, LogicalType};
use parquet::file::metadata::{
    FileMetaData, ParquetMetaData, ParquetMetaDataBuilder, RowGroupMetaData,
};
use parquet::schema::types::{ColumnPath, SchemaDescriptor, Type, TypePtr};

use super::footer_rewrite::{FooterRewrite, FooterRewritingReaderFactory};
use crate::spec::field_id_of;

/// Key of the Arrow schema Parquet writers embed in the footer (dropped from narrowed footers:
/// it describes the whole struct).
const ARROW_SCHEMA_KEY: &str = "ARROW:schema";

/// The fields to keep of each narrowed struct column.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeafProjection {
    /// Field id of a top-level struct column → ids of the fields accessed (each kept whole,
    /// with the structs on the way to it).
    structs: BTreeMap<i32, BTreeSet<i32>>,
}

/// How an expression tree uses a top-level column.
#[derive(Debug, Default)]
struct ColumnUses {
    /// Used other than through field access.
    whole: bool,
    /// Field-access paths.
    paths: Vec<Vec<String>>,
}

impl LeafProjection {
    /// The narrowing keeping, per struct column (by field id), the fields (by id) in `structs`.
    pub fn from_fields(structs: BTreeMap<i32, BTreeSet<i32>>) -> Self {
        Self { structs }
    }

    /// Per struct column (by field id), the ids of the fields kept.
    pub fn fields(&self) -> &BTreeMap<i32, BTreeSet<i32>> {
        &self.structs
    }

    /// The narrowing allowed by `exprs` over `schema` (columns resolved by name): `None` when
    /// no struct column is used only through field access.
    pub fn from_uses(schema: &Schema, exprs: &[&Arc<dyn PhysicalExpr>]) -> Option<Self> {
        let mut uses: HashMap<String, ColumnUses> = HashMap::new();
        for expr in exprs {
            collect_uses(expr, &mut uses);
        }
        let mut structs = BTreeMap::new();
        for (name, used) in uses {
            if used.whole || used.paths.is_empty() {
                continue;
            }
            let Ok(field) = schema.field_with_name(&name) else {
                continue;
            };
            let (DataType::Struct(_), Some(id)) = (field.data_type(), field_id_of(field)) else {
                continue;
            };
            let mut keep = BTreeSet::new();
            for path in &used.paths {
                // A path not resolvable here (unknown name, missing id): keep it whole.
                keep.insert(accessed_field_id(field, path).unwrap_or(id));
            }
            if !keep.contains(&id) {
                structs.insert(id, keep);
            }
        }
        (!structs.is_empty()).then_some(Self { structs })
    }

    /// `metadata` with the unneeded struct leaves removed; `None` when nothing is removed.
    pub fn narrow(&self, metadata: &ParquetMetaData) -> Option<ParquetMetaData> {
        let footer = metadata.file_metadata();
        let old_schema = footer.schema_descr();
        let root = old_schema.root_schema();
        let mut changed = false;
        let mut fields: Vec<TypePtr> = Vec::with_capacity(root.get_fields().len());
        for field in root.get_fields() {
            let keep = field_id(field).and_then(|id| self.structs.get(&id));
            match keep {
                Some(keep) if is_plain_group(field) => match narrow_group(field, keep) {
                    Narrowed::Same => fields.push(Arc::clone(field)),
                    Narrowed::To(narrowed) => {
                        changed = true;
                        fields.push(narrowed);
                    }
                    Narrowed::Empty => changed = true,
                },
                _ => fields.push(Arc::clone(field)),
            }
        }
        if !changed || fields.is_empty() {
            return None;
        }
        let info = root.get_basic_info();
        let new_root = Type::group_type_builder(info.name())
            .with_fields(fields)
            .build()
            .ok()?;
        let schema = Arc::new(SchemaDescriptor::new(Arc::new(new_root)));
        // New leaf i is old leaf leaves[i].
        let old_leaves: HashMap<&ColumnPath, usize> = old_schema
            .columns()
            .iter()
            .enumerate()
            .map(|(i, c)| (c.path(), i))
            .collect();
        let leaves: Vec<usize> = schema
            .columns()
            .iter()
            .map(|c| old_leaves.get(c.path()).copied())
            .collect::<Option<_>>()?;

        let row_groups = metadata
            .row_groups()
            .iter()
            .map(|rg| narrow_row_group(rg, &schema, &leaves))
            .collect::<Option<Vec<_>>>()?;
        let key_values = footer.key_value_metadata().map(|kvs| {
            kvs.iter()
                .filter(|kv| kv.key != ARROW_SCHEMA_KEY)
                .cloned()
                .collect()
        });
        let column_orders = footer
            .column_orders()
            .map(|orders| leaves.iter().map(|&i| orders[i]).collect());
        let file = FileMetaData::new(
            footer.version(),
            footer.num_rows(),
            footer.created_by().map(str::to_string),
            key_values,
            Arc::clone(&schema),
            column_orders,
        );
        let column_index = metadata.column_index().map(|index| {
            index
                .iter()
                .map(|per_group| leaves.iter().map(|&i| per_group[i].clone()).collect())
                .collect()
        });
        let offset_index = metadata.offset_index().map(|index| {
            index
                .iter()
                .map(|per_group| leaves.iter().map(|&i| per_group[i].clone()).collect())
                .collect()
        });
        Some(
            ParquetMetaDataBuilder::new(file)
                .set_row_groups(row_groups)
                .set_column_index(column_index)
                .set_offset_index(offset_index)
                .build(),
        )
    }
}

/// Records how `expr` uses top-level columns.
fn collect_uses(expr: &Arc<dyn PhysicalExpr>, uses: &mut HashMap<String, ColumnUses>) {
    if let Some((column, path)) = field_access(expr) {
        uses.entry(column.name().to_string())
            .or_default()
            .paths
            .push(path);
        return;
    }
    if let Some(column) = expr.as_any().downcast_ref::<Column>() {
        uses.entry(column.name().to_string()).or_default().whole = true;
        return;
    }
    for child in expr.children() {
        collect_uses(child, uses);
    }
}

/// `column.a.b…` written as `get_field` calls (nested or with several names).
fn field_access(expr: &Arc<dyn PhysicalExpr>) -> Option<(&Column, Vec<String>)> {
    let call = expr.as_any().downcast_ref::<ScalarFunctionExpr>()?;
    if call.name() != "get_field" {
        return None;
    }
    let (base, names) = call.args().split_first()?;
    let names = names
        .iter()
        .map(
            |arg| match arg.as_any().downcast_ref::<Literal>()?.value() {
                ScalarValue::Utf8(Some(s))
                | ScalarValue::LargeUtf8(Some(s))
                | ScalarValue::Utf8View(Some(s)) => Some(s.clone()),
                _ => None,
            },
        )
        .collect::<Option<Vec<_>>>()?;
    if names.is_empty() {
        return None;
    }
    if let Some(column) = base.as_any().downcast_ref::<Column>() {
        return Some((column, names));
    }
    let (column, mut path) = field_access(base)?;
    path.extend(names);
    Some((column, path))
}

/// The field id reached by `path` from struct `field`: the last struct field on the path (a
/// path continuing into a list or map stops at it).
fn accessed_field_id(field: &Field, path: &[String]) -> Option<i32> {
    let mut current = field;
    for name in path {
        let DataType::Struct(children) = current.data_type() else {
            break;
        };
        current = children.iter().find(|c| c.name() == name)?;
    }
    field_id_of(current)
}

/// The field id of a Parquet schema node.
fn field_id(node: &Type) -> Option<i32> {
    let info = node.get_basic_info();
    info.has_id().then(|| info.id())
}

/// A group that is a struct (not a list or map).
fn is_plain_group(node: &Type) -> bool {
    let info = node.get_basic_info();
    node.is_group()
        && info
            .logical_type_ref()
            .is_none_or(|t| !matches!(t, LogicalType::List | LogicalType::Map))
        && !matches!(
            info.converted_type(),
            ConvertedType::LIST | ConvertedType::MAP | ConvertedType::MAP_KEY_VALUE
        )
}

/// What narrowing did to a group.
enum Narrowed {
    Same,
    To(TypePtr),
    /// No field kept.
    Empty,
}

/// Keeps the fields of struct `group` whose id is in `keep` (whole), and the structs leading
/// to them; fields without an id are kept whole.
fn narrow_group(group: &TypePtr, keep: &BTreeSet<i32>) -> Narrowed {
    let mut fields: Vec<TypePtr> = Vec::new();
    let mut changed = false;
    for child in group.get_fields() {
        match field_id(child) {
            None => fields.push(Arc::clone(child)),
            Some(id) if keep.contains(&id) => fields.push(Arc::clone(child)),
            Some(_) if is_plain_group(child) => match narrow_group(child, keep) {
                Narrowed::Same => fields.push(Arc::clone(child)),
                Narrowed::To(narrowed) => {
                    changed = true;
                    fields.push(narrowed);
                }
                Narrowed::Empty => changed = true,
            },
            Some(_) => changed = true,
        }
    }
    if !changed {
        return Narrowed::Same;
    }
    if fields.is_empty() {
        return Narrowed::Empty;
    }
    let info = group.get_basic_info();
    let mut builder = Type::group_type_builder(info.name())
        .with_fields(fields)
        .with_converted_type(info.converted_type())
        .with_logical_type(info.logical_type_ref().cloned());
    if info.has_repetition() {
        builder = builder.with_repetition(info.repetition());
    }
    if info.has_id() {
        builder = builder.with_id(Some(info.id()));
    }
    match builder.build() {
        Ok(narrowed) => Narrowed::To(Arc::new(narrowed)),
        Err(_) => Narrowed::Same,
    }
}

/// A row group's metadata over the narrowed `schema`, whose leaf i is old leaf `leaves[i]`.
fn narrow_row_group(
    rg: &RowGroupMetaData,
    schema: &Arc<SchemaDescriptor>,
    leaves: &[usize],
) -> Option<RowGroupMetaData> {
    let mut builder = RowGroupMetaData::builder(Arc::clone(schema))
        .set_num_rows(rg.num_rows())
        .set_total_byte_size(rg.total_byte_size())
        .set_column_metadata(leaves.iter().map(|&i| rg.column(i).clone()).collect());
    if let Some(ordinal) = rg.ordinal() {
        builder = builder.set_ordinal(ordinal);
    }
    if let Some(offset) = rg.file_offset() {
        builder = builder.set_file_offset(offset);
    }
    builder.build().ok()
}

impl FooterRewrite for LeafProjection {
    fn rewrite(&self, _object_path: &str, footer: Arc<ParquetMetaData>) -> Arc<ParquetMetaData> {
        self.narrow(&footer).map(Arc::new).unwrap_or(footer)
    }
}

/// A reader factory whose footers are narrowed by a [`LeafProjection`].
pub type LeafProjectingReaderFactory = FooterRewritingReaderFactory<LeafProjection>;
