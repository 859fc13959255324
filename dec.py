from adbc_driver_flightsql import dbapi
c = dbapi.connect("grpc://127.0.0.1:50073")
for sql in ["SELECT sum(x) FROM (VALUES (CAST(99999999999999999999999999999999999999 AS DECIMAL(38,0))), (CAST(1 AS DECIMAL(38,0)))) t(x)",
            "SELECT sum(x) FROM (VALUES (CAST(99999999999999999999999999999999999999 AS DECIMAL(38,0))), (CAST(99999999999999999999999999999999999999 AS DECIMAL(38,0)))) t(x)",
            "SELECT g, sum(x) FROM (VALUES (1, CAST(99999999999999999999999999999999999999 AS DECIMAL(38,0))), (1, CAST(99999999999999999999999999999999999999 AS DECIMAL(38,0)))) t(g, x) GROUP BY g"]:
    try:
        cur = c.cursor(); cur.execute(sql); print(cur.fetch_arrow_table().to_pylist())
    except Exception as e:
        print("ERR", str(e)[:200])
