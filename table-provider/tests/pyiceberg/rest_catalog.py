"""PyIceberg through an Iceberg REST catalog, for table-provider/tests/it/rest_catalog.rs.

    rest_catalog.py URI TOKEN write NAMESPACE.TABLE ROWS_JSON   # create if missing, append rows
    rest_catalog.py URI TOKEN read NAMESPACE.TABLE              # print the rows as JSON

`write` rows are [id, name] pairs (id: long, name: string). `read` prints each row as the list
of its values in column order: {"rows": [...sorted],
"snapshots": N}.
"""

import json
import sys

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
)


def main() -> None:
    uri, token, command, table_name = sys.argv[1:5]
    catalog = RestCatalog("rest", uri=uri, token=token)
    namespace = table_name.rsplit(".", 1)[0]
    if command == "write":
        rows = json.loads(sys.argv[5])
        catalog.create_namespace_if_not_exists(namespace)
        table = catalog.create_table_if_not_exists(table_name, schema=SCHEMA)
        data = pa.table(
            {
                "id": pa.array([r[0] for r in rows], pa.int64()),
                "name": pa.array([r[1] for r in rows], pa.string()),
            }
        )
        table.append(data)
        print(json.dumps({"snapshots": len(table.metadata.snapshots)}))
    elif command == "read":
        table = catalog.load_table(table_name)
        arrow = table.scan().to_arrow()
        rows = sorted(
            [list(r.values()) for r in arrow.to_pylist()],
            key=lambda r: json.dumps(r),
        )
        print(json.dumps({"rows": rows, "snapshots": len(table.metadata.snapshots)}))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    main()
