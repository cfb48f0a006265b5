// Roles4 prints what each role gets from Cassandra, step by step, with the
// Apache Cassandra Java driver 4.x: QUERY, PREPARE/EXECUTE, BATCH (text, and
// a BatchStatement of bound statements), DDL, GRANT and USE against tables
// roles_ks1.t and roles_ks2.t (test/security's rolesSetup creates them).
//
//	java -cp 'DRIVER4_JARS/*' test/java/driver4/Roles4.java DATACENTER NAME=HOST:PORT[,NAME=HOST:PORT...] USER:PASSWORD...
//
// Every step prints one line, "STEP ROLE TARGET STEP: OUTCOME", the rows read
// or the exception's class and message; test/security's
// TestRolesJavaDriver4 compares a direct target with the proxy. The steps
// read only row 1, which none of them writes, so the targets run one after
// the other without a reset. The last line is "done".
import com.datastax.oss.driver.api.core.CqlIdentifier;
import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.cql.*;
import java.net.InetSocketAddress;
import java.util.*;
import java.util.concurrent.Callable;

public class Roles4 {
  static String outcome(Callable<Object> step) {
    try {
      Object r = step.call();
      if (r instanceof ResultSet) {
        List<String> rows = new ArrayList<>();
        for (Row row : (ResultSet) r) {
          rows.add(row.getFormattedContents());
        }
        return "rows " + rows;
      }
      return String.valueOf(r);
    } catch (Exception e) {
      return e.getClass().getSimpleName() + ": " + e.getMessage();
    }
  }

  public static void main(String[] args) {
    String dc = args[0];
    String[] targets = args[1].split(",");
    for (int a = 2; a < args.length; a++) {
      String user = args[a].substring(0, args[a].indexOf(':'));
      String pass = args[a].substring(args[a].indexOf(':') + 1);
      for (String target : targets) {
        String name = target.substring(0, target.indexOf('='));
        String hp = target.substring(target.indexOf('=') + 1);
        int i = hp.lastIndexOf(':');
        InetSocketAddress point = new InetSocketAddress(hp.substring(0, i), Integer.parseInt(hp.substring(i + 1)));
        String label = "STEP " + user + " " + name + " ";
        CqlSession s;
        try {
          s = CqlSession.builder().addContactPoint(point).withLocalDatacenter(dc)
              .withAuthCredentials(user, pass).build();
        } catch (Exception e) {
          System.out.println(label + "connect: " + e.getClass().getSimpleName() + ": " + e.getMessage());
          continue;
        }
        try {
          System.out.println(label + "protocol: " + s.getContext().getProtocolVersion());
          Map<String, PreparedStatement> prepared = new HashMap<>();
          List<Map.Entry<String, Callable<Object>>> steps = new ArrayList<>();
          steps.add(Map.entry("select ks1", () -> s.execute("SELECT v FROM roles_ks1.t WHERE k = 1")));
          steps.add(Map.entry("select ks2", () -> s.execute("SELECT v FROM roles_ks2.t WHERE k = 1")));
          steps.add(Map.entry("insert ks1", () -> s.execute("INSERT INTO roles_ks1.t (k, v) VALUES (20, 'twenty')")));
          steps.add(Map.entry("update ks2", () -> s.execute("UPDATE roles_ks2.t SET v = 'veinte' WHERE k = 20")));
          steps.add(Map.entry("batch text ks1", () -> s.execute(
              "BEGIN UNLOGGED BATCH INSERT INTO roles_ks1.t (k, v) VALUES (21, 'a'); "
                  + "INSERT INTO roles_ks1.t (k, v) VALUES (22, 'b') APPLY BATCH")));
          String[][] stmts = {
            {"s1", "SELECT v FROM roles_ks1.t WHERE k = ?"},
            {"s2", "SELECT v FROM roles_ks2.t WHERE k = ?"},
            {"i1", "INSERT INTO roles_ks1.t (k, v) VALUES (?, ?)"},
            {"i2", "INSERT INTO roles_ks2.t (k, v) VALUES (?, ?)"},
          };
          for (String[] st : stmts) {
            steps.add(Map.entry("prepare " + st[0], () -> {
              prepared.put(st[0], s.prepare(st[1]));
              return "prepared";
            }));
            steps.add(Map.entry("execute " + st[0], () -> {
              PreparedStatement ps = prepared.get(st[0]);
              if (ps == null) return "not prepared";
              return st[0].startsWith("s") ? s.execute(ps.bind(1)) : s.execute(ps.bind(23, "c"));
            }));
          }
          for (String b : new String[] {"i1", "i2"}) {
            steps.add(Map.entry("batch prepared " + b, () -> {
              PreparedStatement ps = prepared.get(b);
              if (ps == null) return "not prepared";
              return s.execute(BatchStatement.newInstance(DefaultBatchType.LOGGED, ps.bind(24, "d"), ps.bind(25, "e")));
            }));
          }
          steps.add(Map.entry("create table", () -> s.execute("CREATE TABLE roles_ks1.ddl_java (k int PRIMARY KEY)")));
          steps.add(Map.entry("alter table", () -> s.execute("ALTER TABLE roles_ks1.t ADD extra_java text")));
          steps.add(Map.entry("truncate ks2", () -> s.execute("TRUNCATE roles_ks2.t")));
          steps.add(Map.entry("grant", () -> s.execute("GRANT SELECT ON KEYSPACE roles_ks2 TO " + user)));
          steps.add(Map.entry("use ks2", () -> s.execute("USE roles_ks2")));
          steps.add(Map.entry("select used ks2", () -> s.execute("SELECT v FROM t WHERE k = 1")));
          steps.add(Map.entry("use ks1", () -> s.execute("USE roles_ks1")));
          steps.add(Map.entry("select used ks1", () -> s.execute("SELECT v FROM t WHERE k = 1")));
          steps.add(Map.entry("insert used ks1", () -> s.execute("INSERT INTO t (k, v) VALUES (26, 'f')")));
          steps.add(Map.entry("prepare used", () -> {
            prepared.put("u", s.prepare("SELECT v FROM t WHERE k = ?"));
            return "prepared";
          }));
          steps.add(Map.entry("execute used", () -> {
            PreparedStatement ps = prepared.get("u");
            return ps == null ? "not prepared" : s.execute(ps.bind(1));
          }));
          // A session bound to a keyspace from the start (USE at connect).
          steps.add(Map.entry("session keyspace ks1", () -> {
            try (CqlSession ks = CqlSession.builder().addContactPoint(point).withLocalDatacenter(dc)
                .withAuthCredentials(user, pass).withKeyspace(CqlIdentifier.fromCql("roles_ks1")).build()) {
              return ks.execute("SELECT v FROM t WHERE k = 1");
            }
          }));
          for (Map.Entry<String, Callable<Object>> st : steps) {
            System.out.println(label + st.getKey() + ": " + outcome(st.getValue()));
          }
        } finally {
          s.close();
        }
      }
    }
    System.out.println("done");
  }
}
