// Probe drives the DataStax Java driver 3.x (the one Cassandra itself ships
// in its lib directory) through the proxy, the way an unchanged Java
// application would: it discovers the cluster, checks schema agreement,
// creates a keyspace and table, binds a session to the keyspace (USE),
// prepares, pages, batches and routes by token. Any surprise throws.
//
//	java -cp 'CASSANDRA_LIB/*' test/java/Probe.java HOST:PORT[,HOST:PORT...] EXPECTED_HOSTS
//
// test/drivers/java_test.go runs it.
import com.datastax.driver.core.*;
import com.datastax.driver.core.policies.*;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.*;

public class Probe {
  static void check(boolean ok, String what) {
    if (!ok) throw new IllegalStateException("check failed: " + what);
  }

  public static void main(String[] args) throws Exception {
    List<InetSocketAddress> points = new ArrayList<>();
    for (String hp : args[0].split(",")) {
      int i = hp.lastIndexOf(':');
      points.add(new InetSocketAddress(hp.substring(0, i), Integer.parseInt(hp.substring(i + 1))));
    }
    int expectedHosts = Integer.parseInt(args[1]);
    Set<InetSocketAddress> listen = new HashSet<>(points);
    try (Cluster cluster = Cluster.builder()
        .addContactPointsWithPorts(points)
        .withoutJMXReporting()
        .withLoadBalancingPolicy(new TokenAwarePolicy(DCAwareRoundRobinPolicy.builder().build()))
        .build()) {
      Session s = cluster.connect();
      Metadata md = cluster.getMetadata();
      System.out.println("protocol " + cluster.getConfiguration().getProtocolOptions().getProtocolVersion()
          + ", cluster " + md.getClusterName() + ", partitioner " + md.getPartitioner());
      Set<Host> hosts = md.getAllHosts();
      for (Host h : hosts) {
        System.out.println("host " + h.getEndPoint().resolve() + " dc " + h.getDatacenter() + " up " + h.isUp()
            + " tokens " + h.getTokens().size() + " version " + h.getCassandraVersion());
        check(listen.contains(h.getEndPoint().resolve()), "host " + h.getEndPoint() + " is one of the proxy's addresses " + listen);
        check(h.isUp(), "host " + h + " up");
        check(!h.getTokens().isEmpty(), "host " + h + " has tokens");
        check(h.getCassandraVersion() != null, "host " + h + " has a release_version");
      }
      check(hosts.size() == expectedHosts, hosts.size() + " hosts, want " + expectedHosts);
      check(md.checkSchemaAgreement(), "schema agreement");

      ResultSet ddl = s.execute("CREATE KEYSPACE IF NOT EXISTS it_java WITH replication = "
          + "{'class': 'SimpleStrategy', 'replication_factor': 1}");
      check(ddl.getExecutionInfo().isSchemaInAgreement(), "schema agreement after CREATE KEYSPACE");
      s.execute("DROP TABLE IF EXISTS it_java.t");
      s.execute("CREATE TABLE it_java.t (k int PRIMARY KEY, v text)");
      check(md.getKeyspace("it_java") != null && md.getKeyspace("it_java").getTable("t") != null,
          "schema metadata has it_java.t");

      Session ks = cluster.connect("it_java");
      PreparedStatement ins = ks.prepare("INSERT INTO t (k, v) VALUES (?, ?)");
      for (int k = 0; k < 100; k++) {
        ks.execute(ins.bind(k, "v" + k));
      }
      BatchStatement batch = new BatchStatement();
      batch.add(ins.bind(1000, "a"));
      batch.add(ins.bind(1001, "b"));
      ks.execute(batch);

      Statement all = new SimpleStatement("SELECT k, v FROM t").setFetchSize(7);
      int rows = 0;
      for (Row r : ks.execute(all)) {
        int k = r.getInt("k");
        String want = k == 1000 ? "a" : k == 1001 ? "b" : "v" + k;
        check(r.getString("v").equals(want), "row " + r + ", want v = " + want);
        rows++;
      }
      check(rows == 102, rows + " rows paged 7 at a time, want 102");

      PreparedStatement sel = ks.prepare("SELECT v FROM t WHERE k = ?");
      for (int k = 0; k < 20; k++) {
        BoundStatement b = sel.bind(k);
        ByteBuffer key = b.getRoutingKey(ProtocolVersion.V4, CodecRegistry.DEFAULT_INSTANCE);
        check(!md.getReplicas("it_java", key).isEmpty(), "replicas of key " + k);
        Row r = ks.execute(b).one();
        check(r != null && r.getString("v").equals("v" + k), "SELECT k = " + k);
      }
      System.out.println("OK rows " + rows);
    }
  }
}
