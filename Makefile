# Entry points; each installs what it needs first.
.PHONY: deps build test demo bench clean

deps:
	scripts/install-deps.sh

build: deps
	swift build

# The test command the README and CI use.
test: deps
	swift build --build-tests
	swift test --disable-xctest

# The main job end to end against the bundled loopback origin.
demo:
	scripts/demo.sh

# mediafetch against curl and aria2c on nginx (not a test: it measures).
bench: deps
	scripts/bench.sh

clean:
	rm -rf .build .build-release
