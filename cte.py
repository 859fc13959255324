import time, sys
from adbc_driver_flightsql import dbapi
c = dbapi.connect("grpc://127.0.0.1:50072")
for n in [125, 250, 500]:
    parts = ["c0 AS (SELECT 1 AS x)"] + [f"c{i} AS (SELECT x + 1 AS x FROM c{i-1})" for i in range(1, n)]
    sql = "WITH " + ", ".join(parts) + f" SELECT x FROM c{n-1}"
    t = time.time()
    cur = c.cursor(); cur.execute(sql); r = cur.fetch_arrow_table()
    print(n, round(time.time()-t, 2), r.to_pylist())
    parts = ["c0 AS (SELECT 1 AS x)"] + [f"c{i} AS (SELECT x FROM c{i-1} UNION ALL SELECT x FROM c0)" for i in range(1, min(n, 400))]
