#!/bin/bash
set -euo pipefail
cd /app/rpn
ls -R
make 2>&1 | tail -3 || true
# code warnings that -Werror turns into errors
sed -i '/int unused_counter;/d' src/ops.c
sed -i 's/for (int i = 0; i < strlen(buf); i++)/for (size_t i = 0; i < strlen(buf); i++)/' src/main.c
cat > Makefile <<'MK'
CC = gcc
CFLAGS = -Wall -Wextra -Werror -O2
CPPFLAGS = -Iinclude -MMD -MP
LDLIBS = -lm
PREFIX ?= /usr/local

SRCS = $(wildcard src/*.c)
OBJS = $(SRCS:src/%.c=build/%.o)
DEPS = $(OBJS:.o=.d)

.PHONY: all clean install

all: bin/rpn

bin/rpn: $(OBJS) | bin
	$(CC) $(CFLAGS) -o $@ $(OBJS) $(LDLIBS)

build/%.o: src/%.c | build
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

build bin:
	mkdir -p $@

clean:
	rm -rf build bin

install: bin/rpn
	install -D -m 755 bin/rpn $(DESTDIR)$(PREFIX)/bin/rpn

-include $(DEPS)
MK
make clean
make
make -q && echo up-to-date
./bin/rpn "3 4 + 2 *"
