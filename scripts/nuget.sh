#!/usr/bin/env bash
# The NuGet package `Ember`, built and then consumed the way a .NET Framework project does.
#
#   scripts/nuget.sh          pack, then test (CI does this)
#   scripts/nuget.sh pack     only pack: target/nuget/Ember.<version>.nupkg
#
# A .nupkg is a zip with a .nuspec (plus the OPC [Content_Types].xml and _rels/.rels):
#   lib/net461/Ember.dll, Ember.xml, Ember.dll.config
#   runtimes/linux-x64/native/libember.so, runtimes/win-x64/native/ember.dll,
#   runtimes/win-x86/native/ember.dll
#   build/net461/Ember.targets, buildTransitive/net461/Ember.targets   (copy x64\, x86\ next to the app)
# Needs target/release/libember.so (cargo build --release) and target/windows/{x64,x86}/ember.dll
# (scripts/windows.sh build); builds what is missing.
#
# Test (Mono on Linux): `nuget install Ember -Source target/nuget` into a fresh folder (Debian's
# NuGet client, the packages.config flow), then a tiny classic .csproj with a HintPath reference
# and the package's build/net461/Ember.targets imported is built with xbuild and run with mono:
# it starts a server, asks it over HTTP and checks the answer. Also: Ember.dll used straight from
# the package folder (native found in ../../runtimes/linux-x64/native); and the errors: no native
# library, a library of the wrong architecture, and an engine of another ABI version.
# Last line: "nuget: N passed, N failed".
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode="${1:-all}"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"
out="$root/target/nuget"
pkg="$out/Ember.$version.nupkg"

apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    local i
    for i in $(seq 30); do
        if apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then return 0; fi
        apt-get update -qq || true
        sleep 10
    done
    return 1
}

pack() {
    command -v mcs >/dev/null || apt_install mono-devel
    command -v zip >/dev/null || apt_install zip
    # EMBER_NATIVE_LIB: the Linux library to pack (scripts/release.sh: the profile-guided one).
    local native="${EMBER_NATIVE_LIB:-$root/target/release/libember.so}"
    [[ -f "$native" ]] || cargo build --release -j2
    [[ -f target/windows/x64/ember.dll && -f target/windows/x86/ember.dll ]] || scripts/windows.sh build
    bindings/dotnet/build.sh >/dev/null
    local stage="$out/stage"
    rm -rf "$stage" && mkdir -p "$stage"/{lib/net461,runtimes/linux-x64/native,runtimes/win-x64/native,runtimes/win-x86/native,build/net461,buildTransitive/net461,_rels}
    sed "s/@VERSION@/$version/" packaging/nuget/Ember.nuspec.in > "$stage/Ember.nuspec"
    cp "packaging/nuget/[Content_Types].xml" "$stage/"
    cat > "$stage/_rels/.rels" <<'XML'
<?xml version="1.0" encoding="utf-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
  <Relationship Type="http://schemas.microsoft.com/packaging/2010/07/manifest" Target="/Ember.nuspec" Id="R1" />
</Relationships>
XML
    cp bindings/dotnet/bin/Ember.dll bindings/dotnet/bin/Ember.xml bindings/dotnet/Ember.dll.config "$stage/lib/net461/"
    cp "$native" "$stage/runtimes/linux-x64/native/libember.so"
    cp target/windows/x64/ember.dll "$stage/runtimes/win-x64/native/"
    cp target/windows/x86/ember.dll "$stage/runtimes/win-x86/native/"
    cp packaging/nuget/Ember.targets "$stage/build/net461/Ember.targets"
    cp packaging/nuget/Ember.targets "$stage/buildTransitive/net461/Ember.targets"
    cp bindings/dotnet/README.md "$stage/README.md"
    rm -f "$pkg"
    (cd "$stage" && zip -q -X -r "$pkg" "[Content_Types].xml" _rels Ember.nuspec README.md lib runtimes build buildTransitive)
    echo "packed $pkg ($(stat -c %s "$pkg") bytes)"
}

pass=0
fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

# Runs a program that must print "answer: Hello from Ember" (tests/nuget/App.cs).
expect_answer() { # <what> <command...>
    local what="$1" log
    shift
    log="$(mktemp)"
    if timeout 120 "$@" >"$log" 2>&1 && grep -q "^answer: Hello from Ember" "$log"; then
        ok "$what: $(grep '^native: ' "$log" | head -n 1)"
    else
        bad "$what"; cat "$log"
    fi
    rm -f "$log"
}

# Runs the app where loading must fail with an error that contains each given text.
expect_error() { # <what> <dir> <text...>
    local what="$1" dir="$2" log t good=1
    shift 2
    log="$(mktemp)"
    timeout 120 mono "$dir/App.exe" >"$log" 2>&1 || true
    for t in "$@"; do grep -qF -- "$t" "$log" || good=0; done
    if [[ $good -eq 1 ]]; then ok "$what: $(grep -m1 '^error: ' "$log" | cut -c1-160)"; else bad "$what (wanted: $*)"; cat "$log"; fi
    rm -f "$log"
}

consume() {
    command -v xbuild >/dev/null || apt_install mono-xbuild
    command -v nuget >/dev/null || apt_install nuget
    local w
    w="$(mktemp -d)"
    trap 'rm -rf "$w"' RETURN
    # 1. The packages.config flow: the NuGet client unpacks the package into packages/.
    if (cd "$w" && HOME="$w" timeout 300 nuget install Ember -Version "$version" -Source "$out" -OutputDirectory packages -NonInteractive >"$w/nuget.log" 2>&1); then
        ok "nuget install Ember $version from the local source"
    else
        bad "nuget install"; cat "$w/nuget.log"; return
    fi
    local p="$w/packages/Ember.$version"
    local f
    for f in lib/net461/Ember.dll lib/net461/Ember.xml lib/net461/Ember.dll.config runtimes/linux-x64/native/libember.so \
             runtimes/win-x64/native/ember.dll runtimes/win-x86/native/ember.dll build/net461/Ember.targets buildTransitive/net461/Ember.targets; do
        [[ -f "$p/$f" ]] && ok "package has $f" || bad "package lacks $f"
    done

    # 2. A classic project referencing it as packages.config does (HintPath + Import of the targets).
    mkdir -p "$w/App"
    cp tests/nuget/App.cs "$w/App/"
    cat > "$w/App/App.csproj" <<XML
<?xml version="1.0" encoding="utf-8"?>
<Project ToolsVersion="4.0" DefaultTargets="Build" xmlns="http://schemas.microsoft.com/developer/msbuild/2003">
  <PropertyGroup>
    <OutputType>Exe</OutputType>
    <AssemblyName>App</AssemblyName>
    <TargetFrameworkVersion>v4.6.1</TargetFrameworkVersion>
    <OutputPath>bin</OutputPath>
    <Platform>AnyCPU</Platform>
  </PropertyGroup>
  <ItemGroup>
    <Reference Include="System" />
    <Reference Include="Ember"><HintPath>..\\packages\\Ember.$version\\lib\\net461\\Ember.dll</HintPath></Reference>
  </ItemGroup>
  <ItemGroup><Compile Include="App.cs" /></ItemGroup>
  <Import Project="\$(MSBuildToolsPath)\\Microsoft.CSharp.targets" />
  <Import Project="..\\packages\\Ember.$version\\build\\net461\\Ember.targets" />
</Project>
XML
    if (cd "$w/App" && timeout 300 xbuild /nologo /verbosity:quiet App.csproj >"$w/xbuild.log" 2>&1); then
        ok "xbuild App.csproj with Ember.targets imported"
    else
        bad "xbuild"; cat "$w/xbuild.log"; return
    fi
    for f in App.exe Ember.dll Ember.dll.config x64/ember.dll x86/ember.dll libember.so; do
        [[ -f "$w/App/bin/$f" ]] && ok "bin/$f copied" || bad "bin/$f not copied"
    done
    expect_answer "built app runs under mono" mono "$w/App/bin/App.exe"

    # 3. Ember.dll used from the package folder itself: the native library is found in
    #    ../../runtimes/linux-x64/native relative to Ember.dll.
    mkdir -p "$w/direct"
    mcs -nologo -out:"$w/direct/App.exe" -r:"$p/lib/net461/Ember.dll" tests/nuget/App.cs
    expect_answer "Ember.dll referenced in place (runtimes/linux-x64/native)" env MONO_PATH="$p/lib/net461" mono "$w/direct/App.exe"

    # 4. Errors name the file. No native library at all:
    mkdir -p "$w/missing"
    cp "$p/lib/net461/Ember.dll" "$p/lib/net461/Ember.dll.config" "$w/direct/App.exe" "$w/missing/"
    expect_error "missing native library" "$w/missing" "DllNotFoundException" "$w/missing/libember.so (not found)" "$w/missing/runtimes/linux-x64/native/libember.so (not found)"
    # A library for another architecture (an arm64 ELF header):
    mkdir -p "$w/wrongarch"
    cp "$w/missing/"* "$w/wrongarch/"
    cp "$p/runtimes/linux-x64/native/libember.so" "$w/wrongarch/libember.so"
    printf '\xb7\x00' | dd of="$w/wrongarch/libember.so" bs=1 seek=18 conv=notrunc status=none
    expect_error "wrong architecture" "$w/wrongarch" "BadImageFormatException" "$w/wrongarch/libember.so is built for arm64, but this process is x64"
    # A Windows DLL where the Linux library belongs:
    mkdir -p "$w/windll"
    cp "$w/missing/"* "$w/windll/"
    cp "$p/runtimes/win-x64/native/ember.dll" "$w/windll/libember.so"
    expect_error "Windows DLL on Linux" "$w/windll" "$w/windll/libember.so is a Windows DLL"
    # An engine of another ABI version is refused, with both numbers:
    mkdir -p "$w/abi"
    cp "$w/missing/"* "$w/abi/"
    printf 'unsigned ember_abi_version(void) { return 999; }\n' > "$w/abi/fake.c"
    cc -shared -fPIC -Wl,-soname,libember.so.0 -o "$w/abi/libember.so" "$w/abi/fake.c"
    local abi
    abi="$(sed -n 's/^#define EMBER_ABI_VERSION \([0-9]*\)$/\1/p' include/ember.h)"
    expect_error "other ABI version refused" "$w/abi" "$w/abi/libember.so" "ABI version 999" "needs ABI version $abi"
}

pack
[[ "$mode" == pack ]] && exit 0
consume
echo "nuget: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
