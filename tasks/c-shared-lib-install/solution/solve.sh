#!/bin/bash
set -euo pipefail
cd /app/libkv
cat Makefile
make 2>&1 | tail -n 5 || true
rm -f kvtool
# kv_put: replace the value of an existing key
python3 - <<'PY'
p = "src/kv.c"
s = open(p).read()
s = s.replace('''    size_t b = hash_str(key) % NBUCKETS;
    struct entry *e = malloc(sizeof *e);''', '''    size_t b = hash_str(key) % NBUCKETS;
    for (struct entry *old = kv->buckets[b]; old; old = old->next) {
        if (strcmp(old->key, key) == 0) {
            char *v = dup_str(value);
            if (!v) return -1;
            free(old->value);
            old->value = v;
            return 0;
        }
    }
    struct entry *e = malloc(sizeof *e);''')
open(p, "w").write(s)
PY
# public API gets default visibility, the rest is hidden by -fvisibility=hidden
sed -i 's/^typedef struct kv kv_t;$/typedef struct kv kv_t;\n\n#define KV_API __attribute__((visibility("default")))/' include/kv.h
sed -i -E 's/^(kv_t \*kv_new|void kv_free|int kv_put|const char \*kv_get|size_t kv_count|const char \*kv_version)/KV_API \1/' include/kv.h
cat include/kv.h
cat > Makefile <<'MK'
VERSION = 1.2.0
SOMAJOR = 1
PREFIX ?= /usr/local
DESTDIR ?=
CC ?= gcc
CFLAGS ?= -O2
CFLAGS += -Wall -Wextra
CPPFLAGS += -Iinclude -Isrc -DKV_VERSION='"$(VERSION)"'
B = build
LIBOBJS = $(B)/kv.o $(B)/hash.o
PICOBJS = $(B)/pic/kv.o $(B)/pic/hash.o
SONAME = libkv.so.$(SOMAJOR)
SHLIB = libkv.so.$(VERSION)

.PHONY: all clean install
all: $(B)/libkv.a $(B)/$(SHLIB) $(B)/$(SONAME) $(B)/libkv.so $(B)/kvtool

$(B)/%.o: src/%.c include/kv.h src/hash.h | $(B)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(B)/pic/%.o: src/%.c include/kv.h src/hash.h | $(B)/pic
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -fvisibility=hidden -c -o $@ $<

$(B)/kvtool.o: tools/kvtool.c include/kv.h | $(B)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<

$(B) $(B)/pic:
	mkdir -p $@

$(B)/libkv.a: $(LIBOBJS)
	rm -f $@
	ar rcs $@ $^

$(B)/$(SHLIB): $(PICOBJS)
	$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $^

$(B)/$(SONAME): | $(B)/$(SHLIB)
	ln -sfn $(SHLIB) $@

$(B)/libkv.so: | $(B)/$(SONAME)
	ln -sfn $(SONAME) $@

$(B)/kvtool: $(B)/kvtool.o $(B)/$(SHLIB) | $(B)/libkv.so $(B)/$(SONAME)
	$(CC) -o $@ $(B)/kvtool.o -L$(B) -lkv -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib'

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include
	install -m 755 $(B)/kvtool $(DESTDIR)$(PREFIX)/bin/kvtool
	install -m 755 $(B)/$(SHLIB) $(DESTDIR)$(PREFIX)/lib/$(SHLIB)
	ln -sfn $(SHLIB) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sfn $(SONAME) $(DESTDIR)$(PREFIX)/lib/libkv.so
	install -m 644 $(B)/libkv.a $(DESTDIR)$(PREFIX)/lib/libkv.a
	install -m 644 include/kv.h $(DESTDIR)$(PREFIX)/include/kv.h

clean:
	rm -rf $(B)
MK
make clean
make -j8
make
nm -D --defined-only build/libkv.so.1.2.0
readelf -d build/kvtool | grep -E 'NEEDED|RPATH|RUNPATH'
printf 'a=1\nb=2\na=3\n' | build/kvtool count
printf 'a=1\nb=2\na=3\n' | build/kvtool get a
build/kvtool version
make install DESTDIR=/tmp/stage PREFIX=/opt/kv
/tmp/stage/opt/kv/bin/kvtool version
