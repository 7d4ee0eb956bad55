// Small admin helper for infra/kafka.sh: one JVM for the readiness check and for creating all
// topics, instead of one kafka-topics JVM per topic. Uses only kafka-clients.
//
//   java -cp 'libs/*:tools' StewardKafkaAdmin BOOTSTRAP ready TIMEOUT_SECONDS
//   java -cp 'libs/*:tools' StewardKafkaAdmin BOOTSTRAP create NAME:PARTITIONS [NAME:PARTITIONS ...]
//   java -cp 'libs/*:tools' StewardKafkaAdmin BOOTSTRAP list
//
// Exit codes: 0 ok, 1 failure, 2 usage.

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

public final class StewardKafkaAdmin {
    private StewardKafkaAdmin() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            usage();
        }
        String bootstrap = args[0];
        String cmd = args[1];
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "steward-infra-admin");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "5000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "10000");
        props.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "100");
        props.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        props.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        props.put(AdminClientConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "500");
        int rc;
        try (Admin admin = Admin.create(props)) {
            switch (cmd) {
                case "ready":
                    rc = ready(admin, args.length > 2 ? Integer.parseInt(args[2]) : 60);
                    break;
                case "create":
                    rc = create(admin, List.of(args).subList(2, args.length));
                    break;
                case "list":
                    for (String name : new TreeSet<>(admin.listTopics().names().get(10, TimeUnit.SECONDS))) {
                        System.out.println(name);
                    }
                    rc = 0;
                    break;
                default:
                    usage();
                    rc = 2;
            }
        }
        System.exit(rc);
    }

    private static void usage() {
        System.err.println("usage: StewardKafkaAdmin BOOTSTRAP ready [TIMEOUT_S] | create NAME:PARTITIONS... | list");
        System.exit(2);
    }

    /** Waits until the broker answers metadata and topic-listing requests. */
    private static int ready(Admin admin, int timeoutSeconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        Exception last = null;
        while (System.nanoTime() < deadline) {
            try {
                int nodes = admin.describeCluster().nodes().get(5, TimeUnit.SECONDS).size();
                admin.listTopics().names().get(5, TimeUnit.SECONDS);
                if (nodes > 0) {
                    System.out.println("ready: " + nodes + " broker(s)");
                    return 0;
                }
            } catch (ExecutionException | java.util.concurrent.TimeoutException e) {
                last = e;
            }
            Thread.sleep(200);
        }
        System.err.println("broker not ready after " + timeoutSeconds + "s: " + last);
        return 1;
    }

    /** Creates the topics that do not exist yet; reports those that exist with another partition count. */
    private static int create(Admin admin, List<String> specs) throws Exception {
        List<NewTopic> wanted = new ArrayList<>();
        for (String spec : specs) {
            String[] parts = spec.split(":");
            if (parts.length < 1 || parts.length > 3 || parts[0].isEmpty()) {
                System.err.println("bad topic spec (want NAME:PARTITIONS[:REPLICATION]): " + spec);
                return 2;
            }
            int partitions = parts.length > 1 ? Integer.parseInt(parts[1]) : 1;
            short replication = parts.length > 2 ? Short.parseShort(parts[2]) : 1;
            wanted.add(new NewTopic(parts[0], partitions, replication));
        }
        Set<String> existing = admin.listTopics().names().get(10, TimeUnit.SECONDS);
        List<NewTopic> missing = new ArrayList<>();
        for (NewTopic t : wanted) {
            if (!existing.contains(t.name())) {
                missing.add(t);
            }
        }
        int rc = 0;
        if (!missing.isEmpty()) {
            CreateTopicsResult result = admin.createTopics(missing);
            for (Map.Entry<String, org.apache.kafka.common.KafkaFuture<Void>> e : result.values().entrySet()) {
                try {
                    e.getValue().get(30, TimeUnit.SECONDS);
                    System.out.println("created " + e.getKey());
                } catch (ExecutionException ex) {
                    if (ex.getCause() instanceof TopicExistsException) {
                        System.out.println("exists  " + e.getKey());
                    } else {
                        System.err.println("failed  " + e.getKey() + ": " + ex.getCause());
                        rc = 1;
                    }
                }
            }
        }
        List<String> names = new ArrayList<>();
        for (NewTopic t : wanted) {
            names.add(t.name());
        }
        Map<String, TopicDescription> described = describeWhenLed(admin, names, 30);
        for (NewTopic t : wanted) {
            int actual = described.get(t.name()).partitions().size();
            if (actual != t.numPartitions()) {
                System.err.println("WARNING: topic " + t.name() + " has " + actual + " partitions, wanted "
                        + t.numPartitions() + " (not changed)");
            }
            System.out.println("topic " + t.name() + " partitions=" + actual);
        }
        return rc;
    }

    /**
     * The topics' descriptions once every partition has a leader. The controller acknowledges a creation
     * before the broker's metadata names the topic, so a describe (or a client's first produce or fetch)
     * right after it can meet UnknownTopicOrPartition or a partition without a leader; this waits that out
     * (up to timeoutSeconds) instead of handing a half-created topic to the caller.
     */
    private static Map<String, TopicDescription> describeWhenLed(Admin admin, List<String> names, int timeoutSeconds)
            throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        while (true) {
            try {
                Map<String, TopicDescription> described = admin.describeTopics(names).allTopicNames()
                        .get(10, TimeUnit.SECONDS);
                boolean led = true;
                for (TopicDescription d : described.values()) {
                    for (org.apache.kafka.common.TopicPartitionInfo p : d.partitions()) {
                        led &= p.leader() != null && !p.leader().isEmpty();
                    }
                }
                if (led || System.nanoTime() > deadline) {
                    return described;
                }
            } catch (ExecutionException ex) {
                if (!(ex.getCause() instanceof UnknownTopicOrPartitionException) || System.nanoTime() > deadline) {
                    throw ex;
                }
            }
            Thread.sleep(100);
        }
    }
}
