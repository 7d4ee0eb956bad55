// Small admin helper for infra/kafka.sh: one JVM for the readiness check and for creating all
// topics, instead of one kafka-topics JVM per topic. Uses only kafka-clients.
//
//   java -cp 'libs/*:tools' StewardKafkaAdmin BOOTSTRAP ready TIMEOUT_SECONDS
//   java -cp 'libs/*:tools' StewardKafkaAdmin BOOTSTRAP create NAME:PARTITIONS [NAME:PARTITIONS ...]
//   java -cp 'libs/*:tools' StewardKafkaAdmin BOOTSTRAP list
//   java -cp 'libs/*:tools' StewardKafkaAdmin BOOTSTRAP acls PRINCIPAL:OPERATION:TYPE:PATTERN:NAME ...
//   java -cp 'libs/*:tools' StewardKafkaAdmin BOOTSTRAP scram USER   (the new password on stdin)
//
// The connection's security settings (SASL SCRAM-SHA-512 as the admin principal) come from the
// properties file named by STEWARD_KAFKA_CLIENT_CONFIG (mode 0600, written by infra/kafka.sh).
//
// Exit codes: 0 ok, 1 failure, 2 usage.

import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
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
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
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
        String clientConfig = System.getenv("STEWARD_KAFKA_CLIENT_CONFIG");
        if (clientConfig != null && !clientConfig.isEmpty()) {
            try (FileInputStream in = new FileInputStream(clientConfig)) {
                props.load(in);
            }
        }
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
                case "acls":
                    rc = acls(admin, List.of(args).subList(2, args.length));
                    break;
                case "scram":
                    rc = args.length == 3 ? scram(admin, args[2]) : 2;
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
        System.err.println("usage: StewardKafkaAdmin BOOTSTRAP ready [TIMEOUT_S] | create NAME:PARTITIONS... | list"
                + " | acls PRINCIPAL:OPERATION:TYPE:PATTERN:NAME... | scram USER (password on stdin)");
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

    /** Allows each PRINCIPAL:OPERATION:TYPE:PATTERN:NAME (e.g. steward-api:WRITE:TOPIC:LITERAL:steward.commands);
     *  creating a binding that exists changes nothing. */
    private static int acls(Admin admin, List<String> specs) throws Exception {
        List<AclBinding> bindings = new ArrayList<>();
        for (String spec : specs) {
            String[] p = spec.split(":", 5);
            if (p.length != 5 || p[0].isEmpty() || p[4].isEmpty()) {
                System.err.println("bad ACL spec (want PRINCIPAL:OPERATION:TYPE:PATTERN:NAME): " + spec);
                return 2;
            }
            bindings.add(new AclBinding(
                    new ResourcePattern(ResourceType.valueOf(p[2]), p[4], PatternType.valueOf(p[3])),
                    new AccessControlEntry("User:" + p[0], "*", AclOperation.valueOf(p[1]), AclPermissionType.ALLOW)));
        }
        admin.createAcls(bindings).all().get(30, TimeUnit.SECONDS);
        System.out.println("acls " + bindings.size() + " binding(s) in place");
        return 0;
    }

    /** Sets USER's SCRAM-SHA-512 password (read from stdin, never from the command line). */
    private static int scram(Admin admin, String user) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String password = in.readLine();
        if (password == null || password.isBlank()) {
            System.err.println("no password on stdin");
            return 2;
        }
        admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.strip())))
                .all().get(30, TimeUnit.SECONDS);
        System.out.println("scram " + user + " set");
        return 0;
    }
}
