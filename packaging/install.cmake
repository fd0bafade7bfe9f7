# Install rules for the files around the binaries: systemd unit, sysusers
# entry, D-Bus policy, bash completion, man pages, default policy, the
# monitoring assets.
# Included from the top-level CMakeLists.txt (and, until it is, injected by
# the package builds with -DCMAKE_PROJECT_INCLUDE=<this file>).
include_guard(GLOBAL)
include(GNUInstallDirs)
find_package(PkgConfig QUIET)

set(_l7_top ${CMAKE_CURRENT_LIST_DIR}/..)

# Ask systemd where units go: /lib/systemd/system on Debian 12,
# /usr/lib/systemd/system on Fedora and on Debian 13.
set(_unitdir "")
set(_sysusersdir "")
if(PKG_CONFIG_FOUND)
  pkg_get_variable(_unitdir systemd systemdsystemunitdir)
  pkg_get_variable(_sysusersdir systemd sysusersdir)
endif()
if(NOT _unitdir)
  set(_unitdir ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
endif()
if(NOT _sysusersdir)
  set(_sysusersdir ${CMAKE_INSTALL_PREFIX}/lib/sysusers.d)
endif()
set(L7FAST_SYSTEMD_UNITDIR ${_unitdir} CACHE PATH "systemd system unit directory")
set(L7FAST_SYSUSERSDIR ${_sysusersdir} CACHE PATH "sysusers.d directory")

install(FILES ${_l7_top}/systemd/l7fast.service DESTINATION ${L7FAST_SYSTEMD_UNITDIR})
install(FILES ${_l7_top}/systemd/l7fast.sysusers
        DESTINATION ${L7FAST_SYSUSERSDIR} RENAME l7fast.conf)
install(FILES ${_l7_top}/systemd/org.l7fast.Manager1.conf
        DESTINATION ${CMAKE_INSTALL_DATADIR}/dbus-1/system.d)
install(FILES ${_l7_top}/daemon/completion/l7fastctl.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME l7fastctl)

# The default policy; packages mark it as a configuration file.
if(EXISTS ${_l7_top}/packaging/policy.toml)
  install(FILES ${_l7_top}/packaging/policy.toml
          DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/l7fast)
else()
  message(WARNING "packaging/policy.toml is missing: no default policy installed")
endif()
install(DIRECTORY DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/l7fast/policy.d)

# For the operator's Grafana and Prometheus (docs/monitoring.md): not read by
# l7fast itself. tests/monitoring/check.py checks both against the metrics
# l7fastd exports.
install(FILES ${_l7_top}/packaging/monitoring/l7fast-dashboard.json
              ${_l7_top}/packaging/monitoring/l7fast-alerts.yml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/l7fast/monitoring)

# Man pages from Markdown (docs/man/pages lists them; pandoc). ON by default when pandoc is there;
# the package builds force it ON so a missing pandoc is an error.
find_program(L7FAST_PANDOC pandoc)
if(L7FAST_PANDOC)
  set(_man_default ON)
else()
  set(_man_default OFF)
endif()
option(L7FAST_MANPAGES "Build and install the man pages (needs pandoc)" ${_man_default})
if(L7FAST_MANPAGES)
  if(NOT L7FAST_PANDOC)
    message(FATAL_ERROR "L7FAST_MANPAGES=ON needs pandoc")
  endif()
  file(STRINGS ${_l7_top}/docs/man/pages _man_lines REGEX "^[^# \t]")
  set(_man_outputs)
  set(_man_sources ${_l7_top}/docs/man/pages)
  foreach(_line ${_man_lines})
    string(REGEX MATCH "^([^ \t]+)[ \t]+([^ \t]+)" _m "${_line}")
    set(_page ${CMAKE_MATCH_1})                              # l7fastd.8
    list(APPEND _man_sources ${_l7_top}/${CMAKE_MATCH_2})
    string(REGEX REPLACE "^.*\\.([0-9])$" "\\1" _sect ${_page})
    list(APPEND _man_outputs ${CMAKE_BINARY_DIR}/man/${_page})
    install(FILES ${CMAKE_BINARY_DIR}/man/${_page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_sect})
  endforeach()
  add_custom_command(
    OUTPUT ${_man_outputs}
    COMMAND ${_l7_top}/docs/man/gen-man.sh ${CMAKE_BINARY_DIR}/man ${PROJECT_VERSION}
    DEPENDS ${_man_sources} ${_l7_top}/docs/man/gen-man.sh
    COMMENT "man pages"
    VERBATIM)
  add_custom_target(man ALL DEPENDS ${_man_outputs})
endif()
