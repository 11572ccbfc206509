use super::parse_file;

#[test]
fn every_setting_this_module_reads_is_a_known_name() {
    // Every file of this module that reads settings.
    let sources = [
        include_str!("../config.rs"),
        include_str!("env.rs"),
        include_str!("oidc_env.rs"),
    ];
    for quoted in sources
        .iter()
        .flat_map(|source| source.split('"').skip(1).step_by(2))
    {
        let setting = quoted.starts_with("IDEM_") || quoted.starts_with("LEPTOS_");
        if setting && quoted.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            assert!(
                super::SETTINGS.contains(&quoted),
                "{quoted} is missing from SETTINGS"
            );
        }
    }
}

#[test]
fn a_settings_file_reads_like_an_environment_file_and_refuses_typos() {
    let settings = parse_file(
        "# Idem\nDATABASE_URL=postgres://idem@db/idem\n\nIDEM_PUBLIC_URL=\"https://idem.example.com\"\nRUST_LOG='info'\n",
    )
    .unwrap();
    assert_eq!(settings["DATABASE_URL"], "postgres://idem@db/idem");
    assert_eq!(settings["IDEM_PUBLIC_URL"], "https://idem.example.com");
    assert_eq!(settings["RUST_LOG"], "info");
    assert_eq!(
        parse_file("IDEM_DEMO=1\nIDEM_PUBLC_URL=x").unwrap_err(),
        "line 2: IDEM_PUBLC_URL is not a setting of Idem's"
    );
    assert!(parse_file("PATH=/bin").is_err());
    assert_eq!(
        parse_file("IDEM_DEMO").unwrap_err(),
        "line 1: expected NAME=value"
    );
}
