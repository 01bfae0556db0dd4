// LevelDB on a served directory: write keys and close, reopen and read
// them back; or write with sync and wait to be killed (kill -9 test).
//
//   leveldb DIR write N | check N | sync-and-wait N
#include <leveldb/db.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unistd.h>

static std::string key(int i) { return "key" + std::to_string(i); }
static std::string value(int i) { return std::string(100 + i % 400, 'a' + i % 26) + std::to_string(i); }

static void die(const std::string& what, const leveldb::Status& s) {
    std::fprintf(stderr, "leveldb: %s: %s\n", what.c_str(), s.ToString().c_str());
    std::exit(1);
}

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: %s DIR write|check|sync-and-wait N\n", argv[0]);
        return 2;
    }
    std::string mode = argv[2];
    int n = std::atoi(argv[3]);
    leveldb::Options opts;
    opts.create_if_missing = true;
    opts.write_buffer_size = 256 << 10;  // small: several table files and compactions
    leveldb::DB* raw = nullptr;
    leveldb::Status s = leveldb::DB::Open(opts, argv[1], &raw);
    if (!s.ok()) die("open", s);
    std::unique_ptr<leveldb::DB> db(raw);
    leveldb::WriteOptions w;
    w.sync = mode == "sync-and-wait";
    if (mode == "write" || mode == "sync-and-wait") {
        for (int i = 0; i < n; i++) {
            s = db->Put(w, key(i), value(i));
            if (!s.ok()) die("put", s);
        }
        if (mode == "sync-and-wait") {
            std::printf("ready\n");
            std::fflush(stdout);
            pause();
        }
        return 0;
    }
    for (int i = 0; i < n; i++) {
        std::string got;
        s = db->Get(leveldb::ReadOptions(), key(i), &got);
        if (!s.ok()) die("get " + key(i), s);
        if (got != value(i)) {
            std::fprintf(stderr, "leveldb: %s read back wrong\n", key(i).c_str());
            return 1;
        }
    }
    std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
    int count = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) count++;
    if (count != n) {
        std::fprintf(stderr, "leveldb: %d keys, expected %d\n", count, n);
        return 1;
    }
    std::printf("leveldb: %d keys ok\n", n);
    return 0;
}
