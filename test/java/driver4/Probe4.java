// Probe4 drives the Apache Cassandra Java driver 4.x through the proxy, the
// way an unchanged Java application would: node discovery, schema agreement,
// DDL, a keyspace-bound session, prepared statements, paging, a batch and
// the token map. Any surprise throws.
//
//	java -cp 'DRIVER4_JARS/*' test/java/driver4/Probe4.java HOST:PORT[,HOST:PORT...] EXPECTED_NODES DATACENTER
//
// test/drivers/java_test.go runs it.
import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.config.DefaultDriverOption;
import com.datastax.oss.driver.api.core.config.DriverConfigLoader;
import com.datastax.oss.driver.api.core.cql.*;
import com.datastax.oss.driver.api.core.metadata.*;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.*;

public class Probe4 {
  static void check(boolean ok, String what) {
    if (!ok) throw new IllegalStateException("check failed: " + what);
  }

  // config is each session's own (a session closes its loader): a DROP
  // TABLE on the node that other test packages load at the same time, on
  // two cores, took longer than the driver's default 2 s.
  static DriverConfigLoader config() {
    return DriverConfigLoader.programmaticBuilder()
        .withDuration(DefaultDriverOption.REQUEST_TIMEOUT, Duration.ofSeconds(30)).build();
  }

  public static void main(String[] args) {
    List<InetSocketAddress> points = new ArrayList<>();
    for (String hp : args[0].split(",")) {
      int i = hp.lastIndexOf(':');
      points.add(new InetSocketAddress(hp.substring(0, i), Integer.parseInt(hp.substring(i + 1))));
    }
    int expectedNodes = Integer.parseInt(args[1]);
    String dc = args[2];
    Set<InetSocketAddress> listen = new HashSet<>(points);
    try (CqlSession s = CqlSession.builder().addContactPoints(points).withLocalDatacenter(dc)
        .withConfigLoader(config()).build()) {
      Metadata md = s.getMetadata();
      System.out.println("protocol " + s.getContext().getProtocolVersion() + ", cluster " + md.getClusterName().orElse("?"));
      Collection<Node> nodes = md.getNodes().values();
      for (Node n : nodes) {
        InetSocketAddress a = (InetSocketAddress) n.getEndPoint().resolve();
        System.out.println("node " + a + " dc " + n.getDatacenter() + " state " + n.getState()
            + " version " + n.getCassandraVersion());
        check(listen.contains(a), "node " + a + " is one of the proxy's addresses " + listen);
        check(n.getState() == NodeState.UP, "node " + a + " up");
        check(n.getCassandraVersion() != null, "node " + a + " has a release_version");
        check(dc.equals(n.getDatacenter()), "node " + a + " in " + dc);
      }
      check(nodes.size() == expectedNodes, nodes.size() + " nodes, want " + expectedNodes);
      check(s.checkSchemaAgreement(), "schema agreement");

      ResultSet ddl = s.execute("CREATE KEYSPACE IF NOT EXISTS it_java4 WITH replication = "
          + "{'class': 'SimpleStrategy', 'replication_factor': 1}");
      check(ddl.getExecutionInfo().isSchemaInAgreement(), "schema agreement after CREATE KEYSPACE");
      s.execute("DROP TABLE IF EXISTS it_java4.t");
      s.execute("CREATE TABLE it_java4.t (k int PRIMARY KEY, v text)");
      check(s.getMetadata().getKeyspace("it_java4").flatMap(k -> k.getTable("t")).isPresent(),
          "schema metadata has it_java4.t");

      try (CqlSession ks = CqlSession.builder().addContactPoints(points).withLocalDatacenter(dc)
          .withConfigLoader(config()).withKeyspace("it_java4").build()) {
        PreparedStatement ins = ks.prepare("INSERT INTO t (k, v) VALUES (?, ?)");
        for (int k = 0; k < 100; k++) {
          ks.execute(ins.bind(k, "v" + k));
        }
        ks.execute(BatchStatement.newInstance(DefaultBatchType.LOGGED, ins.bind(1000, "a"), ins.bind(1001, "b")));

        int rows = 0;
        for (Row r : ks.execute(SimpleStatement.newInstance("SELECT k, v FROM t").setPageSize(7))) {
          int k = r.getInt("k");
          String want = k == 1000 ? "a" : k == 1001 ? "b" : "v" + k;
          check(want.equals(r.getString("v")), "row " + k + ": " + r.getString("v") + ", want " + want);
          rows++;
        }
        check(rows == 102, rows + " rows paged 7 at a time, want 102");

        PreparedStatement sel = ks.prepare("SELECT v FROM t WHERE k = ?");
        TokenMap tm = ks.getMetadata().getTokenMap().orElseThrow(() -> new IllegalStateException("no token map"));
        for (int k = 0; k < 20; k++) {
          BoundStatement b = sel.bind(k);
          ByteBuffer key = b.getRoutingKey();
          check(key != null && !tm.getReplicas("it_java4", key).isEmpty(), "replicas of key " + k);
          Row r = ks.execute(b).one();
          check(r != null && ("v" + k).equals(r.getString("v")), "SELECT k = " + k);
        }
        System.out.println("OK rows " + rows);
      }
    }
  }
}
