# C install of Ember: the header, the shared library with its soname, the static library and
# a pkg-config file.
#   make                                  cargo build --release
#   make install PREFIX=/usr/local        (also DESTDIR=... for staging, LIBDIR=... to override)
#   make install PGO=1 ...                the profile-guided library (scripts/pgo.sh; what
#                                         scripts/release.sh ships)
#   make uninstall PREFIX=/usr/local
# Then: cc app.c $(pkg-config --cflags --libs ember)
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DESTDIR ?=
CARGO ?= cargo
CARGOFLAGS ?=
ifeq ($(PGO),1)
RELEASE := target/pgo/lib
BUILD_LIB := scripts/pgo.sh
else
RELEASE := target/release
BUILD_LIB := $(CARGO) build --release $(CARGOFLAGS)
endif

VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
MAJOR := $(word 1,$(subst ., ,$(VERSION)))
# The soname is fixed in build.rs (libember.so.0); the file carries the full version.
SONAME := libember.so.$(MAJOR)
REALNAME := libember.so.$(VERSION)

all: $(RELEASE)/libember.so

$(RELEASE)/libember.so $(RELEASE)/libember.a: FORCE
	$(BUILD_LIB)

install: all
	install -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 include/ember.h $(DESTDIR)$(INCLUDEDIR)/ember.h
	install -m 755 $(RELEASE)/libember.so $(DESTDIR)$(LIBDIR)/$(REALNAME)
	ln -sf $(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libember.so
	install -m 644 $(RELEASE)/libember.a $(DESTDIR)$(LIBDIR)/libember.a
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@VERSION@|$(VERSION)|' \
	    ember.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/ember.pc
	@echo "installed Ember $(VERSION) into $(DESTDIR)$(PREFIX)"

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/ember.h $(DESTDIR)$(LIBDIR)/$(REALNAME) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	      $(DESTDIR)$(LIBDIR)/libember.so $(DESTDIR)$(LIBDIR)/libember.a $(DESTDIR)$(LIBDIR)/pkgconfig/ember.pc

FORCE:

.PHONY: all install uninstall FORCE
