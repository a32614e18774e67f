"""Client quotas (security/quotas.py): KIP-55's resolution, Kafka's Rate, the throttle time,
and a seeded simulation of clients that honour throttle_time_ms."""
import random

from security.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaManager,
    Rate,
    entity,
    resolve,
    throttle_time_ms,
)


def test_user_and_client_id_quota_takes_precedence_over_every_other():
    quotas = {
        entity(user="alice", client_id="app"): {PRODUCER_BYTE_RATE: 1},
        entity(user="alice", client_id=None): {PRODUCER_BYTE_RATE: 2},
        entity(user="alice"): {PRODUCER_BYTE_RATE: 3},
        entity(user=None, client_id="app"): {PRODUCER_BYTE_RATE: 4},
        entity(user=None, client_id=None): {PRODUCER_BYTE_RATE: 5},
        entity(user=None): {PRODUCER_BYTE_RATE: 6},
        entity(client_id="app"): {PRODUCER_BYTE_RATE: 7},
        entity(client_id=None): {PRODUCER_BYTE_RATE: 8},
    }
    order = list(quotas)
    expected_tags = [("alice", "app"), ("alice", "app"), ("alice", ""), ("alice", "app"), ("alice", "app"),
                     ("alice", ""), ("", "app"), ("", "app")]
    for i, (bound, tags) in enumerate(zip(range(1, 9), expected_tags)):
        left = {e: quotas[e] for e in order[i:]}
        resolved = resolve(left, PRODUCER_BYTE_RATE, "alice", "app")
        assert (resolved.bound, (resolved.user_tag, resolved.client_tag)) == (bound, tags)
    assert resolve({}, PRODUCER_BYTE_RATE, "alice", "app").bound is None


def test_a_quota_of_another_key_does_not_apply():
    quotas = {entity(user="alice"): {CONSUMER_BYTE_RATE: 100}}
    assert resolve(quotas, PRODUCER_BYTE_RATE, "alice", "app").bound is None
    assert resolve(quotas, CONSUMER_BYTE_RATE, "alice", "app").bound == 100


def test_a_user_quota_is_shared_by_all_the_users_client_ids_and_a_default_is_not_shared():
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE)
    quotas = {entity(user="alice"): {PRODUCER_BYTE_RATE: 1000}, entity(user=None): {PRODUCER_BYTE_RATE: 1000}}
    # alice's two clients share her 1,000 B/s: 6,000 B each over an 11-s window is over it.
    assert manager.record_and_get_throttle_time_ms(quotas, "alice", "a", 6000, 0) == 0
    assert manager.record_and_get_throttle_time_ms(quotas, "alice", "b", 6000, 0) > 0
    # bob and carol each get the default's 1,000 B/s of their own.
    assert manager.record_and_get_throttle_time_ms(quotas, "bob", "a", 6000, 0) == 0
    assert manager.record_and_get_throttle_time_ms(quotas, "carol", "a", 6000, 0) == 0


def test_rate_counts_at_least_samples_minus_one_full_windows():
    rate = Rate(samples=11, window_ms=1000)
    rate.record(1000, 0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == 100.0
    rate.record(1000, 15_500)
    # The first sample ended more than the whole window (11 s) ago: reset; the rate is over
    # the second's 10 windows again.
    assert rate.measure(15_500) == 100.0


def test_rate_measures_a_steady_stream_over_the_elapsed_window():
    rate = Rate(samples=11, window_ms=1000)
    for t in range(0, 30_000, 100):
        rate.record(100, t)  # 1,000 B/s
    assert abs(rate.measure(29_900) - 1000) / 1000 < 0.1


def test_throttle_time_brings_the_rate_back_to_the_quota():
    """O * W / (W + X) = T: at twice the quota over 10 s, 10 s more."""
    assert throttle_time_ms(2000, 1000, 10_000) == 10_000
    assert throttle_time_ms(1100, 1000, 10_000) == 1000


def test_a_client_within_its_quota_is_not_throttled():
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE)
    quotas = {entity(client_id="app"): {PRODUCER_BYTE_RATE: 1000}}
    for t in range(0, 20_000, 100):
        assert manager.record_and_get_throttle_time_ms(quotas, "alice", "app", 90, t) == 0


def test_a_client_without_a_quota_is_never_throttled():
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE)
    quotas = {entity(client_id="other"): {PRODUCER_BYTE_RATE: 1}}
    assert manager.record_and_get_throttle_time_ms(quotas, "alice", "app", 10**9, 0) == 0


def test_request_percentage_throttle_is_bounded_by_one_window():
    manager = ClientQuotaManager.for_requests(samples=11, window_seconds=1)
    quotas = {entity(user="alice"): {REQUEST_PERCENTAGE: 1}}
    assert manager.record_and_get_throttle_time_ms(quotas, "alice", "app", 10_000, 0) == 1000
    bytes_manager = ClientQuotaManager(PRODUCER_BYTE_RATE)
    quotas = {entity(user="alice"): {PRODUCER_BYTE_RATE: 1}}
    assert bytes_manager.record_and_get_throttle_time_ms(quotas, "alice", "app", 10_000, 0) > 1000


def test_unrecord_takes_back_a_throttled_fetch():
    manager = ClientQuotaManager(CONSUMER_BYTE_RATE)
    quotas = {entity(user="alice"): {CONSUMER_BYTE_RATE: 1000}}
    assert manager.record_and_get_throttle_time_ms(quotas, "alice", "app", 20_000, 0) > 0
    manager.unrecord(quotas, "alice", "app", 20_000, 0)
    assert manager.record_and_get_throttle_time_ms(quotas, "alice", "app", 5000, 1) == 0


def test_max_value_in_window_is_the_quota_over_samples_minus_one_windows():
    manager = ClientQuotaManager(CONSUMER_BYTE_RATE)
    quotas = {entity(user="alice"): {CONSUMER_BYTE_RATE: 1000}}
    assert manager.max_value_in_window(quotas, "alice", "app") == 10_000
    assert manager.max_value_in_window(quotas, "bob", "app") is None


def test_idle_clients_rates_expire():
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE)
    quotas = {entity(user=None): {PRODUCER_BYTE_RATE: 1000}}
    manager.record_and_get_throttle_time_ms(quotas, "alice", "app", 6000, 0)
    manager.expire(3_600_000)
    assert manager.record_and_get_throttle_time_ms(quotas, "alice", "app", 6000, 3_600_000) == 0


def simulate(seed, quota, clients, duration_ms=120_000):
    """Clients that send back to back, each waiting out the throttle time it is answered
    (KIP-219), with request sizes and gaps drawn from a seeded generator. Returns each
    client's bytes per second over the second half of the run."""
    rng = random.Random(seed)
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE)
    quotas = {entity(client_id="greedy"): {PRODUCER_BYTE_RATE: quota}}
    next_send = {name: rng.randrange(50) for name, _ in clients}
    sent = {name: 0 for name, _ in clients}
    sizes = dict(clients)
    half = duration_ms // 2
    while True:
        name = min(next_send, key=lambda n: next_send[n])
        now = next_send[name]
        if now >= duration_ms:
            break
        size = int(sizes[name] * rng.uniform(0.5, 1.5))
        throttle = manager.record_and_get_throttle_time_ms(quotas, "ANONYMOUS", name, size, now)
        if now >= half:
            sent[name] += size
        next_send[name] = now + rng.randrange(1, 20) + throttle
    return {name: sent[name] / (half / 1000) for name in sent}


def test_a_client_over_its_quota_is_throttled_to_within_ten_percent_of_it():
    for seed in range(5):
        rates = simulate(seed, quota=50_000, clients=[("greedy", 10_000), ("other", 2_000)])
        assert abs(rates["greedy"] - 50_000) / 50_000 < 0.10, (seed, rates)
        # The other client, under no quota, keeps its own pace (about 2,000 B per ~10 ms).
        assert rates["other"] > 150_000, (seed, rates)


def test_the_authorizer_and_quota_cores_import_no_io_clock_or_randomness():
    from tests.purity import IO_CLOCK_RANDOMNESS, imports, top_level
    for module in ("authorizer", "quotas"):
        assert not top_level(imports("security", module)) & IO_CLOCK_RANDOMNESS, module
