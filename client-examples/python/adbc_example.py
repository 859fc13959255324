"""Query Petrel with the ADBC Flight SQL driver (DB-API 2.0 plus ADBC's metadata calls).

    pip install adbc-driver-flightsql adbc-driver-manager pyarrow
    python adbc_example.py [URI] [USER PASSWORD]

URI defaults to $PETREL_URI or grpc://127.0.0.1:50051 (`petrel` with no flags serves the
embedded demo table `petrel.demo.seabirds` there).
"""

import os
import sys

import adbc_driver_flightsql.dbapi as flight_sql


def main(argv: list[str]) -> None:
    uri = argv[1] if len(argv) > 1 else os.environ.get("PETREL_URI", "grpc://127.0.0.1:50051")
    db_kwargs = {}
    if len(argv) > 3:
        db_kwargs = {"username": argv[2], "password": argv[3]}
    with flight_sql.connect(uri, db_kwargs=db_kwargs, autocommit=True) as conn:
        info = conn.adbc_get_info()
        print(f"connected to {info['vendor_name']} {info['vendor_version']}")

        # Every catalog, schema, table and column.
        for catalog in conn.adbc_get_objects(depth="columns").read_all().to_pylist():
            for schema in catalog["catalog_db_schemas"]:
                for table in schema["db_schema_tables"]:
                    columns = ", ".join(c["column_name"] for c in table["table_columns"])
                    print(f"{catalog['catalog_name']}.{schema['db_schema_name']}.{table['table_name']}({columns})")

        with conn.cursor() as cur:
            # A query; results arrive as Arrow.
            cur.execute("SELECT species, wingspan_cm FROM seabirds ORDER BY wingspan_cm DESC LIMIT 3")
            for species, wingspan in cur.fetchall():
                print(f"{species}: {wingspan} cm")
            # A parameterised query (a prepared statement; `?` and `$1` both work).
            cur.execute("SELECT species FROM seabirds WHERE weight_g > ? ORDER BY id", (1000,))
            print("heavier than 1 kg:", [r[0] for r in cur.fetchall()])
            # Straight to Arrow / pandas.
            cur.execute("SELECT * FROM seabirds")
            table = cur.fetch_arrow_table()
            print(f"{table.num_rows} rows, schema: {table.schema.names}")


if __name__ == "__main__":
    main(sys.argv)
