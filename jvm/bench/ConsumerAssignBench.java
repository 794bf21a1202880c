// Times Kafka's own consumer assignors on a group written by bench/consumer_bench.py,
// and writes the assignment of the last run so the bench can compare it with ours.
//
// Usage: java -cp <kafka-clients jar>:<build dir> ConsumerAssignBench
//            range|cooperative-sticky WARMUP RUNS GROUP_FILE OUT_FILE [GROUP_FILE OUT_FILE ...]
// GROUP_FILE lines (tab-separated):
//   P topic partition racks      racks comma-separated, "-" for none
//   M member rack instance topics   rack and instance "-" for none, topics comma-separated
//   O member topic:partition,...    what the member owns now (after its M line)
// With owned partitions, cooperative-sticky is run in rounds as a group would run it
// (each with what the last one left each member, at the next generation) until nothing
// is held back for revocation, and that assignment is written: the target; the timing
// is the first round's.
// Prints one line per group: "<group file> <assignor> runs=N min_ms=X median_ms=Y
// cpu_min_ms=X cpu_median_ms=Y" (wall time, and the calling thread's CPU time plus the
// collector's time).

import java.io.IOException;
import java.io.PrintWriter;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupAssignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

public final class ConsumerAssignBench {
    public static void main(String[] args) throws IOException {
        if (args.length < 5 || (args.length - 3) % 2 != 0) {
            System.err.println("usage: ConsumerAssignBench range|cooperative-sticky WARMUP RUNS"
                + " GROUP_FILE OUT_FILE [GROUP_FILE OUT_FILE ...]");
            System.exit(2);
        }
        for (int i = 3; i < args.length; i += 2) {
            run(args[0], Integer.parseInt(args[1]), Integer.parseInt(args[2]), args[i], args[i + 1]);
        }
    }

    private static void run(String name, int warmup, int runs, String groupFile, String outFile)
            throws IOException {
        Map<String, Node> nodeOfRack = new HashMap<>();
        List<PartitionInfo> partitions = new ArrayList<>();
        Map<String, Subscription> subscriptions = new HashMap<>();
        Map<String, List<TopicPartition>> owned = new HashMap<>();
        for (String line : Files.readAllLines(Path.of(groupFile))) {
            String[] f = line.split("\t");
            if (f[0].equals("P")) {
                List<Node> replicas = new ArrayList<>();
                if (!f[3].equals("-")) {
                    for (String rack : f[3].split(",")) {
                        replicas.add(nodeOfRack.computeIfAbsent(
                            rack, r -> new Node(nodeOfRack.size(), "broker-" + r, 9092, r)));
                    }
                }
                Node[] nodes = replicas.toArray(new Node[0]);
                partitions.add(new PartitionInfo(f[1], Integer.parseInt(f[2]),
                    nodes.length > 0 ? nodes[0] : null, nodes, nodes));
            } else if (f[0].equals("M")) {
                Optional<String> rack = f[2].equals("-") ? Optional.empty() : Optional.of(f[2]);
                Subscription s = new Subscription(Arrays.asList(f[4].split(",")), null,
                    Collections.emptyList(), -1, rack);
                s.setGroupInstanceId(f[3].equals("-") ? Optional.empty() : Optional.of(f[3]));
                subscriptions.put(f[1], s);
            } else if (f[0].equals("O")) {
                List<TopicPartition> tps = new ArrayList<>();
                for (String tp : f[2].split(",")) {
                    int colon = tp.lastIndexOf(':');
                    tps.add(new TopicPartition(tp.substring(0, colon), Integer.parseInt(tp.substring(colon + 1))));
                }
                owned.put(f[1], tps);
            }
        }
        if (!owned.isEmpty()) {
            subscriptions = generation(subscriptions, owned, 1);
        }
        Cluster cluster = new Cluster("bench", new ArrayList<>(nodeOfRack.values()), partitions,
            Collections.emptySet(), Collections.emptySet());
        GroupSubscription group = new GroupSubscription(subscriptions);
        GroupAssignment result = null;
        for (int i = 0; i < warmup; i++) {
            result = assignor(name).assign(cluster, group);
        }
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long[] nanos = new long[runs];
        long[] cpu = new long[runs];
        for (int i = 0; i < runs; i++) {
            ConsumerPartitionAssignor assignor = assignor(name);
            long gcStart = gcMillis();
            long cpuStart = threads.getCurrentThreadCpuTime();
            long start = System.nanoTime();
            result = assignor.assign(cluster, group);
            nanos[i] = System.nanoTime() - start;
            // The collector runs outside this thread: its time is added to the CPU figure.
            cpu[i] = threads.getCurrentThreadCpuTime() - cpuStart + (gcMillis() - gcStart) * 1_000_000;
        }
        // Cooperative rounds until nothing is held back for revocation (at most 10).
        for (int round = 2; !owned.isEmpty() && round <= 10; round++) {
            Map<String, List<TopicPartition>> left = new HashMap<>();
            result.groupAssignment().forEach((m, a) -> left.put(m, a.partitions()));
            GroupAssignment next = assignor(name).assign(cluster, new GroupSubscription(generation(subscriptions, left, round)));
            boolean same = true;
            for (Map.Entry<String, ConsumerPartitionAssignor.Assignment> e : next.groupAssignment().entrySet()) {
                same &= new java.util.HashSet<>(e.getValue().partitions()).equals(new java.util.HashSet<>(left.get(e.getKey())));
            }
            result = next;
            if (same) {
                break;
            }
        }
        Arrays.sort(nanos);
        Arrays.sort(cpu);
        System.out.printf("%s %s runs=%d min_ms=%.1f median_ms=%.1f cpu_min_ms=%.1f cpu_median_ms=%.1f%n",
            groupFile, name, runs, nanos[0] / 1e6, nanos[runs / 2] / 1e6, cpu[0] / 1e6, cpu[runs / 2] / 1e6);
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Path.of(outFile)))) {
            for (Map.Entry<String, ConsumerPartitionAssignor.Assignment> e
                    : result.groupAssignment().entrySet()) {
                StringBuilder line = new StringBuilder(e.getKey()).append('\t');
                for (TopicPartition tp : e.getValue().partitions()) {
                    line.append(tp.topic()).append(':').append(tp.partition()).append(',');
                }
                out.println(line);
            }
        }
    }

    private static Map<String, Subscription> generation(
            Map<String, Subscription> members, Map<String, List<TopicPartition>> owned, int generation) {
        Map<String, Subscription> out = new HashMap<>();
        members.forEach((m, s) -> {
            Subscription next = new Subscription(s.topics(), null,
                owned.getOrDefault(m, Collections.emptyList()), generation, s.rackId());
            next.setGroupInstanceId(s.groupInstanceId());
            out.put(m, next);
        });
        return out;
    }

    private static long gcMillis() {
        long total = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            total += Math.max(0, gc.getCollectionTime());
        }
        return total;
    }

    private static ConsumerPartitionAssignor assignor(String name) {
        switch (name) {
            case "range": return new RangeAssignor();
            case "cooperative-sticky": return new CooperativeStickyAssignor();
            default: throw new IllegalArgumentException("unknown assignor " + name + "; use range or cooperative-sticky");
        }
    }
}
