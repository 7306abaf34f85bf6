#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "server/byte_budget.h"
#include "server/lru_cache.h"

using namespace tgraph;

TEST_CASE("LRU cache: hits, misses, byte budget and eviction order", "[cache]") {
  LruCache<std::string, int> cache(100);
  CHECK(cache.Get("a") == nullptr);
  cache.Put("a", std::make_shared<int>(1), 40);
  cache.Put("b", std::make_shared<int>(2), 40);
  REQUIRE(cache.Get("a") != nullptr);  // a is now the most recently used
  CHECK(*cache.Get("a") == 1);
  cache.Put("c", std::make_shared<int>(3), 40);  // 120 > 100: evicts b, the least recently used
  CHECK(cache.Get("b") == nullptr);
  CHECK(*cache.Get("c") == 3);
  CacheStats s = cache.Stats();
  CHECK(s.entries == 2);
  CHECK(s.bytes == 80);
  CHECK(s.evictions == 1);
  CHECK(s.hits == 3);
  CHECK(s.misses == 2);
  CHECK(s.budget_bytes == 100);
}

TEST_CASE("LRU cache: replacing, oversize entries, EraseIf, values outlive eviction", "[cache]") {
  LruCache<std::string, int> cache(100);
  cache.Put("a", std::make_shared<int>(1), 30);
  cache.Put("a", std::make_shared<int>(5), 50);  // replaced, not duplicated
  CHECK(*cache.Get("a") == 5);
  CHECK(cache.Stats().bytes == 50);
  auto big = std::make_shared<int>(9);
  cache.Put("big", big, 101);  // larger than the budget: not kept, nothing evicted
  CHECK(cache.Get("big") == nullptr);
  CHECK(cache.Stats().entries == 1);
  std::shared_ptr<const int> held = cache.Get("a");
  cache.Put("x", std::make_shared<int>(7), 80);  // evicts a
  CHECK(cache.Get("a") == nullptr);
  CHECK(*held == 5);  // a request still holding it keeps it alive
  cache.Put("y1", std::make_shared<int>(1), 10);
  CHECK(cache.EraseIf([](const std::string& k) { return k[0] == 'y' || k == "x"; }) == 2);
  CHECK(cache.Stats().entries == 0);
  CHECK(cache.Stats().bytes == 0);
}

TEST_CASE("LRU cache: concurrent use keeps the accounting exact", "[cache]") {
  LruCache<int, int> cache(1000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 2000; ++i) {
        const int key = (i * 7 + t) % 50;
        if (!cache.Get(key)) cache.Put(key, std::make_shared<int>(key), 10 + key % 30);
      }
    });
  for (auto& th : threads) th.join();
  const CacheStats s = cache.Stats();
  CHECK(s.bytes <= 1000);
  CHECK(s.hits + s.misses == 8000);
  int64_t bytes = 0;
  for (int k = 0; k < 50; ++k)
    if (auto v = cache.Get(k)) bytes += 10 + *v % 30;
  CHECK(bytes == s.bytes);
}

TEST_CASE("byte budget: admits up to the budget, one oversized request alone, and gives bytes back", "[cache]") {
  ByteBudget budget(100);
  {
    auto a = budget.TryAcquire(60);
    REQUIRE(a.has_value());
    auto b = budget.TryAcquire(40);
    REQUIRE(b.has_value());
    CHECK(budget.held() == 100);
    CHECK_FALSE(budget.TryAcquire(1).has_value());  // full: refused, not queued
    CHECK(budget.holders() == 2);
  }
  CHECK(budget.held() == 0);
  {
    auto big = budget.TryAcquire(250);  // larger than the budget, but alone
    REQUIRE(big.has_value());
    CHECK_FALSE(budget.TryAcquire(1).has_value());
  }
  CHECK(budget.TryAcquire(100).has_value());
  CHECK(budget.held() == 0);  // the temporary lease above was released at once
}
