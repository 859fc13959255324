// Query Petrel through the Arrow Flight SQL JDBC driver (org.apache.arrow:flight-sql-jdbc-driver).
//
//   javac PetrelJdbcExample.java
//   java -cp flight-sql-jdbc-driver-<version>.jar:. PetrelJdbcExample \
//       "jdbc:arrow-flight-sql://127.0.0.1:50051/?useEncryption=false" [user password]
//
// The driver uses TLS by default: `useEncryption=false` for a plain-text server, or keep it on
// and add `&trustedCertificates=/path/ca.pem` for a server started with --tls-cert/--tls-key.
// `user=`/`password=` in the URL (or the Properties below) trigger Flight's Basic handshake;
// Petrel answers with a bearer token the driver sends on every later call.
// Every statement goes through CreatePreparedStatement; queries come back as ResultSets.

import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.Properties;

public class PetrelJdbcExample {
    public static void main(String[] args) throws Exception {
        String url = args.length > 0 ? args[0] : "jdbc:arrow-flight-sql://127.0.0.1:50051/?useEncryption=false";
        Properties props = new Properties();
        if (args.length > 2) {
            props.setProperty("user", args[1]);
            props.setProperty("password", args[2]);
        }
        try (Connection conn = DriverManager.getConnection(url, props)) {
            DatabaseMetaData meta = conn.getMetaData();
            System.out.println("connected to " + meta.getDatabaseProductName() + " " + meta.getDatabaseProductVersion());
            try (ResultSet tables = meta.getTables(null, null, "%", null)) {
                while (tables.next()) {
                    System.out.println("table " + tables.getString("TABLE_CAT") + "." + tables.getString("TABLE_SCHEM")
                            + "." + tables.getString("TABLE_NAME"));
                }
            }
            try (Statement st = conn.createStatement();
                 ResultSet rs = st.executeQuery("SELECT species, wingspan_cm FROM seabirds ORDER BY wingspan_cm DESC LIMIT 3")) {
                while (rs.next()) {
                    System.out.println(rs.getString(1) + ": " + rs.getDouble(2) + " cm");
                }
            }
            try (PreparedStatement ps = conn.prepareStatement("SELECT species FROM seabirds WHERE id = ?")) {
                ps.setLong(1, 2L);
                try (ResultSet rs = ps.executeQuery()) {
                    while (rs.next()) {
                        System.out.println("id 2: " + rs.getString(1));
                    }
                }
            }
        }
    }
}
